//! ELF contract (no root needed): every map and program the agent looks up by name exists in
//! the embedded eBPF object, with the key and value sizes agent-common declares, and every
//! map is BTF-defined (so stock bpftool prints named fields).

use agent_common::{Counter, EndpointInfo, EndpointKey, IfaceInfo, maps};
use aya_obj::{Object, maps::Map};
use weft_agent::datapath::ELF;

fn object() -> Object {
    Object::parse(ELF).unwrap_or_else(|e| panic!("embedded object does not parse: {e}"))
}

#[test]
fn maps_exist_with_the_abi_sizes() {
    let object = object();
    let expect = [
        (
            maps::ENDPOINTS,
            size_of::<EndpointKey>(),
            size_of::<EndpointInfo>(),
            maps::ENDPOINTS_MAX,
        ),
        (
            maps::IFACES,
            size_of::<u32>(),
            size_of::<IfaceInfo>(),
            maps::IFACES_MAX,
        ),
        (
            maps::COUNTERS,
            size_of::<u32>(),
            size_of::<Counter>(),
            maps::COUNTERS_MAX,
        ),
    ];
    for (name, key, value, max) in expect {
        let map = object.maps.get(name).unwrap_or_else(|| {
            panic!(
                "map {name} missing; the object has {:?}",
                object.maps.keys().collect::<Vec<_>>()
            )
        });
        assert_eq!(map.key_size() as usize, key, "{name} key size");
        assert_eq!(map.value_size() as usize, value, "{name} value size");
        assert_eq!(map.max_entries(), max, "{name} max entries");
        assert!(
            matches!(map, Map::Btf(_)),
            "{name} must be a BTF map (#[btf_map])"
        );
    }
    for name in maps::PINNED_MAPS {
        assert!(object.maps.contains_key(name), "pinned map {name} missing");
    }
}

#[test]
fn programs_exist() {
    let object = object();
    for name in [maps::PROG_FROM_CONTAINER, maps::PROG_NOOP] {
        assert!(
            object.programs.contains_key(name),
            "program {name} missing; the object has {:?}",
            object.programs.keys().collect::<Vec<_>>()
        );
    }
}
