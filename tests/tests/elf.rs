//! ELF contract (no root needed): every map and program the agent looks up by name exists in
//! the embedded eBPF object, with the type, key and value sizes and capacity agent-common
//! declares, and every map is BTF-defined (so stock bpftool prints named fields).

use agent_common::{
    Counter, EndpointInfo, EndpointKey, IfaceInfo, IpcacheInfo, IpcacheKey, MasqInfo, MasqKey,
    NatEntry4, NatEntry6, NatTuple4, NatTuple6, NetdevInfo, StackInfo, StackKey, TunnelInfo, maps,
};
use aya_obj::{
    Object,
    generated::bpf_map_type::{
        BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_LPM_TRIE, BPF_MAP_TYPE_LRU_HASH,
        BPF_MAP_TYPE_PERCPU_ARRAY,
    },
    maps::Map,
};
use weft_agent::datapath::ELF;

fn object() -> Object {
    Object::parse(ELF).unwrap_or_else(|e| panic!("embedded object does not parse: {e}"))
}

#[test]
fn maps_exist_with_the_abi_sizes() {
    let object = object();
    // LPM keys are `{prefix_len: u32, data}`.
    let lpm = |data: usize| size_of::<u32>() + data;
    let expect = [
        (
            maps::ENDPOINTS,
            BPF_MAP_TYPE_HASH,
            size_of::<EndpointKey>(),
            size_of::<EndpointInfo>(),
            maps::ENDPOINTS_MAX,
        ),
        (
            maps::IFACES,
            BPF_MAP_TYPE_HASH,
            size_of::<u32>(),
            size_of::<IfaceInfo>(),
            maps::IFACES_MAX,
        ),
        (
            maps::COUNTERS,
            BPF_MAP_TYPE_PERCPU_ARRAY,
            size_of::<u32>(),
            size_of::<Counter>(),
            maps::COUNTERS_MAX,
        ),
        (
            maps::IPCACHE,
            BPF_MAP_TYPE_LPM_TRIE,
            lpm(size_of::<IpcacheKey>()),
            size_of::<IpcacheInfo>(),
            maps::IPCACHE_MAX,
        ),
        (
            maps::MASQ_EXCLUDE,
            BPF_MAP_TYPE_LPM_TRIE,
            lpm(size_of::<MasqKey>()),
            size_of::<MasqInfo>(),
            maps::MASQ_EXCLUDE_MAX,
        ),
        (
            maps::NAT4,
            BPF_MAP_TYPE_LRU_HASH,
            size_of::<NatTuple4>(),
            size_of::<NatEntry4>(),
            maps::NAT4_MAX,
        ),
        (
            maps::NAT6,
            BPF_MAP_TYPE_LRU_HASH,
            size_of::<NatTuple6>(),
            size_of::<NatEntry6>(),
            maps::NAT6_MAX,
        ),
        (
            maps::NETDEVS,
            BPF_MAP_TYPE_HASH,
            size_of::<u32>(),
            size_of::<NetdevInfo>(),
            maps::NETDEVS_MAX,
        ),
        (
            maps::STACK_FLOWS,
            BPF_MAP_TYPE_LRU_HASH,
            size_of::<StackKey>(),
            size_of::<StackInfo>(),
            maps::STACK_FLOWS_MAX,
        ),
        (
            maps::TUNNEL,
            BPF_MAP_TYPE_ARRAY,
            size_of::<u32>(),
            size_of::<TunnelInfo>(),
            maps::TUNNEL_MAX,
        ),
    ];
    assert_eq!(
        expect.len(),
        maps::PINNED_MAPS.len(),
        "every pinned map is checked"
    );
    for (name, map_type, key, value, max) in expect {
        let map = object.maps.get(name).unwrap_or_else(|| {
            panic!(
                "map {name} missing; the object has {:?}",
                object.maps.keys().collect::<Vec<_>>()
            )
        });
        assert_eq!(map.map_type(), map_type as u32, "{name} map type");
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
    for name in [
        maps::PROG_FROM_CONTAINER,
        maps::PROG_TO_NETDEV,
        maps::PROG_FROM_NETDEV,
        maps::PROG_FROM_OVERLAY,
        maps::PROG_NOOP,
        maps::PROG_BENCH_TO_NETDEV,
        maps::PROG_BENCH_FROM_NETDEV,
        maps::PROG_BENCH_FROM_CONTAINER,
        maps::PROG_BENCH_COPY,
    ] {
        assert!(
            object.programs.contains_key(name),
            "program {name} missing; the object has {:?}",
            object.programs.keys().collect::<Vec<_>>()
        );
    }
    // The benchmark wrappers keep the frame's head in a map of their own, never pinned.
    let saved = object
        .maps
        .get(maps::BENCH_SAVED)
        .expect("the benchmark wrappers' map");
    assert_eq!(
        (
            saved.map_type(),
            saved.value_size() as usize,
            saved.max_entries()
        ),
        (BPF_MAP_TYPE_PERCPU_ARRAY as u32, maps::BENCH_HEAD, 1)
    );
    assert!(!maps::PINNED_MAPS.contains(&maps::BENCH_SAVED));
}
