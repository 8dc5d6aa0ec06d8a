use clap::Parser as _;

use super::*;

fn resolve(args: &[&str], file: &[(&str, &str)]) -> Result<OperatorConfig, ConfigError> {
    let cli = Cli::try_parse_from(std::iter::once("weft-operator").chain(args.iter().copied()))
        .expect("flags parse");
    let file = file
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    OperatorConfig::resolve(&cli, &file)
}

#[test]
fn defaults_are_ciliums() {
    let c = resolve(&[], &[]).expect("defaults");
    assert_eq!(c.ipam, IpamMode::ClusterPool);
    assert!(c.enable_ipv4 && !c.enable_ipv6);
    assert_eq!(c.cluster_pool.ipv4.mask_size, 24);
    assert_eq!(c.cluster_pool.ipv6.mask_size, 112);
    assert_eq!(c.prometheus_addr, "0.0.0.0:9963".parse().expect("addr"));
    assert_eq!(c.api_addr, "127.0.0.1:9234".parse().expect("addr"));
    assert!(c.leader_election && !c.enable_metrics);
    assert_eq!(c.leader.lease_duration, Duration::from_secs(15));
    assert_eq!(c.leader.renew_deadline, Duration::from_secs(10));
    assert_eq!(c.leader.retry_period, Duration::from_secs(2));
}

#[test]
fn flags_win_over_the_config_dir() {
    let file = [
        ("ipam", "cluster-pool"),
        ("cluster-pool-ipv4-cidr", "10.0.0.0/16 10.1.0.0/16"),
        ("cluster-pool-ipv4-mask-size", "26"),
        ("leader-election", "true"),
    ];
    let c = resolve(&["--ipam", "multi-pool", "--leader-election=false"], &file).expect("ok");
    assert_eq!(c.ipam, IpamMode::MultiPool);
    assert!(!c.leader_election);
    assert_eq!(c.cluster_pool.ipv4.mask_size, 26);
    assert_eq!(c.cluster_pool.ipv4.cidrs.len(), 2);
    let c = resolve(
        &[
            "--cluster-pool-ipv4-cidr",
            "10.9.0.0/16,10.8.0.0/16",
            "--cluster-pool-ipv4-cidr=10.7.0.0/16",
        ],
        &file,
    )
    .expect("ok");
    let got: Vec<String> = c
        .cluster_pool
        .ipv4
        .cidrs
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(got, ["10.9.0.0/16", "10.8.0.0/16", "10.7.0.0/16"]);
}

#[test]
fn the_release_delay_is_seconds_as_in_cilium_or_a_duration() {
    for (given, secs) in [("180", 180), ("30", 30), ("2m", 120), ("1m30s", 90)] {
        let c =
            resolve(&["--ipam", "eni", "--excess-ip-release-delay", given], &[]).expect("valid");
        assert_eq!(c.cloud.release_delay.as_secs(), secs, "{given}");
    }
    let c = resolve(&["--ipam", "eni"], &[("excess-ip-release-delay", "0")]).expect("valid");
    assert!(c.cloud.release_delay.is_zero());
}

#[test]
fn bad_values_name_the_key() {
    for (args, file, want) in [
        (
            vec!["--enable-ipv6=maybe"],
            vec![],
            "enable-ipv6: \"maybe\" is not true or false",
        ),
        (
            vec![],
            vec![("cluster-pool-ipv4-cidr", "10.0.0.0/33")],
            "cluster-pool-ipv4-cidr: \"10.0.0.0/33\"",
        ),
        (vec!["--ipam", "crd"], vec![], "ipam: \"crd\" is not served"),
        (
            vec!["--ipam", "eni", "--eni-tags", "team"],
            vec![],
            "eni-tags: \"team\" is not key=value pairs",
        ),
        (
            vec!["--ipam", "eni", "--excess-ip-release-delay", "soon"],
            vec![],
            "excess-ip-release-delay: \"soon\" is not seconds (such as 180) or a duration",
        ),
        (
            vec!["--leader-election-renew-deadline", "20s"],
            vec![],
            "must be longer than",
        ),
        (
            vec!["--operator-api-serve-addr", "nowhere"],
            vec![],
            "operator-api-serve-addr",
        ),
    ] {
        let err = resolve(&args, &file).expect_err("refused").to_string();
        assert!(err.contains(want), "{args:?} {file:?}: {err}");
    }
}

#[test]
fn auto_create_pools_in_ciliums_format() {
    let c = resolve(
        &[
            "--auto-create-cilium-pod-ip-pools",
            "default=ipv4-cidrs:10.10.0.0/16,10.11.0.0/16;ipv4-mask-size:24",
            "--auto-create-cilium-pod-ip-pools",
            "mars=ipv6-cidrs:fd00:11::/104;ipv6-mask-size:120;allow-first-ip:true",
        ],
        &[],
    )
    .expect("parses");
    let default = &c.auto_create_pools["default"];
    assert_eq!(
        default.ipv4.as_ref().map(|f| (f.cidrs.len(), f.mask_size)),
        Some((2, 24))
    );
    assert!(default.ipv6.is_none());
    let mars = &c.auto_create_pools["mars"];
    assert!(mars.allow_first_ip && !mars.allow_last_ip);
    assert_eq!(mars.ipv6.as_ref().map(|f| f.mask_size), Some(120));
    let c = resolve(
        &[],
        &[(
            "auto-create-cilium-pod-ip-pools",
            "a=ipv4-cidrs:10.0.0.0/8;ipv4-mask-size:24 b=ipv4-cidrs:11.0.0.0/8;ipv4-mask-size:26",
        )],
    )
    .expect("space separated in the ConfigMap");
    assert_eq!(c.auto_create_pools.len(), 2);
    for bad in [
        "noequals",
        "x=ipv4-cidrs:10.0.0.0/8",
        "x=ipv4-cidrs:banana;ipv4-mask-size:24",
        "x=ipv4-mask-size:24;colour:red",
        "x=",
    ] {
        let err = parse_auto_create(bad).expect_err(bad).to_string();
        assert!(
            err.starts_with("auto-create-cilium-pod-ip-pools: "),
            "{err}"
        );
    }
}

#[test]
fn an_auto_created_pool_the_allocator_would_refuse_stops_the_operator() {
    for (entry, field, fix) in [
        (
            "mars=ipv4-cidrs:10.0.0.0/16;ipv4-mask-size:8",
            "ipv4-mask-size",
            "at least /16",
        ),
        (
            "mars=ipv4-cidrs:10.0.0.0/16;ipv4-mask-size:40",
            "ipv4-mask-size",
            "32",
        ),
        (
            "mars=ipv4-cidrs:fd00::/64;ipv4-mask-size:24",
            "ipv4-cidrs",
            "ipv4",
        ),
        (
            "mars=ipv4-cidrs:10.0.0.0/16,10.0.0.0/17;ipv4-mask-size:24",
            "ipv4-cidrs",
            "collides",
        ),
        (
            "mars=ipv6-cidrs:fd00::/64;ipv6-mask-size:120",
            "ipv6-mask-size",
            "too big",
        ),
    ] {
        let err = resolve(&["--auto-create-cilium-pod-ip-pools", entry], &[])
            .expect_err(entry)
            .to_string();
        for want in [
            "auto-create-cilium-pod-ip-pools",
            "pool \"mars\"",
            field,
            fix,
        ] {
            assert!(err.contains(want), "{entry}: {want:?} missing from: {err}");
        }
    }
    // The ConfigMap's entries are checked the same way.
    resolve(
        &[],
        &[(
            "auto-create-cilium-pod-ip-pools",
            "ok=ipv4-cidrs:10.0.0.0/8;ipv4-mask-size:24 bad=ipv4-cidrs:10.0.0.0/16;ipv4-mask-size:8",
        )],
    )
    .expect_err("the bad entry of the ConfigMap");
}

#[test]
fn rates_and_periods_below_or_above_their_bounds_are_refused() {
    for (args, want) in [
        (
            vec!["--limit-ipam-api-qps", "1e-20"],
            "limit-ipam-api-qps: \"0.00000000000000000001\" is not a number of requests per second \
             of at least 0.001",
        ),
        (
            vec!["--nodes-gc-interval", "2562048h"],
            "nodes-gc-interval: \"2562048h\" is not a duration",
        ),
        (
            vec![
                "--leader-election-retry-period",
                "10000000000000000000s10000000000000000000s",
            ],
            "leader-election-retry-period: \"10000000000000000000s10000000000000000000s\" is not a \
             duration",
        ),
    ] {
        let err = resolve(&args, &[]).expect_err("refused").to_string();
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// Flags of [`Cli`] that are not configuration keys (nothing reads them from `--config-dir`).
const FLAG_ONLY: [&str; 3] = ["config-dir", "kubeconfig", "metrics-naming"];

fn flags() -> Vec<String> {
    use clap::CommandFactory as _;
    Cli::command()
        .get_arguments()
        .filter_map(|arg| arg.get_long().map(str::to_owned))
        .filter(|long| long != "help" && long != "version")
        .collect()
}

#[test]
fn every_flag_is_documented_or_flag_only() {
    use weft_cluster_ipam::operator_keys::KEYS;
    for flag in flags() {
        let entries = KEYS.iter().filter(|doc| doc.key == flag).count();
        let expected = usize::from(!FLAG_ONLY.contains(&flag.as_str()));
        assert_eq!(
            entries, expected,
            "--{flag}: {entries} rows in operator_keys"
        );
    }
    let flags = flags();
    for doc in &KEYS {
        assert!(
            flags.iter().any(|flag| flag == doc.key),
            "{}: documented but weft-operator has no such flag",
            doc.key
        );
    }
}

#[test]
fn documented_defaults_are_the_codes() {
    let cli = Cli::default();
    let none = OperatorConfig::resolve(&cli, &BTreeMap::new()).expect("the defaults resolve");
    for doc in &weft_cluster_ipam::operator_keys::KEYS {
        let value = doc.default.as_given();
        let file = BTreeMap::from([(doc.key.to_owned(), value.to_owned())]);
        let given = OperatorConfig::resolve(&cli, &file)
            .unwrap_or_else(|e| panic!("{}: the documented default {value:?}: {e}", doc.key));
        assert_eq!(
            given, none,
            "{}: the documented default {value:?} is not what the operator uses without it",
            doc.key
        );
    }
}

#[test]
fn the_generic_cloud_knobs_are_in_the_cloud_section() {
    let c = resolve(
        &[
            "--limit-ipam-api-qps",
            "2.5",
            "--parallel-alloc-workers",
            "0",
            "--ipam",
            "azure",
            "--azure-release-excess-ips",
        ],
        &[("limit-ipam-api-burst", "7")],
    )
    .expect("valid");
    assert_eq!(
        c.cloud,
        CloudConfig {
            api_qps: 2.5,
            api_burst: 7,
            parallel_alloc_workers: 1,
            release_excess_ips: true,
            release_delay: Duration::from_mins(3),
        }
    );
    assert_eq!(
        resolve(&[], &[]).expect("defaults").cloud,
        CloudConfig::default()
    );
}

#[test]
fn an_identity_s_resource_id_is_refused_with_the_way_to_its_client_id() {
    let id = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/weft";
    let flag = format!("--azure-user-assigned-identity-id={id}");
    let msg = resolve(&[flag.as_str()], &[])
        .expect_err("a resource ID")
        .to_string();
    assert!(msg.contains("client ID (a UUID)"), "{msg}");
    assert!(
        msg.contains(&format!("az identity show --ids {id} --query clientId")),
        "{msg}"
    );
    assert!(msg.contains("Overview page"), "{msg}");
    let uuid = "11111111-2222-3333-4444-555555555555";
    let given = resolve(&[], &[("azure-user-assigned-identity-id", uuid)]).expect("a client ID");
    assert_eq!(given.azure.user_assigned_identity_id, uuid);
}

#[test]
fn the_migration_keys_read_as_ciliums() {
    let c = resolve(&["--ipam", "multi-pool"], &[]).expect("defaults");
    assert_eq!(c.migration, MigrationConfig::default());
    assert!(!c.migration.enabled);
    assert_eq!(c.migration.workers, 16);
    assert_eq!(c.migration.default_pool, "default");
    let c = resolve(
        &[
            "--enable-cluster-pool-to-multi-pool-migration",
            "--multi-pool-migration-workers",
            "4",
        ],
        &[("ipam-default-ip-pool", "custom-pool")],
    )
    .expect("valid");
    assert_eq!(
        c.migration,
        MigrationConfig {
            enabled: true,
            workers: 4,
            default_pool: "custom-pool".to_owned(),
        }
    );
    let refused = resolve(&["--multi-pool-migration-workers", "0"], &[]).expect_err("0 workers");
    assert!(
        refused.to_string().contains("multi-pool-migration-workers"),
        "{refused}"
    );
}
