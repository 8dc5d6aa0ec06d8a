//! IPAM input that cannot work, said out loud (issue 16, finding 5): endpoint records a new
//! configuration can never restore refuse the start, naming them and the fix.

use std::time::Duration;

use weft_tests::{
    ThreadNetNs,
    agent::{Agent, add, example_store},
};

#[test]
fn records_of_a_family_now_off_are_refused_at_start_naming_them_and_the_fix() {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &["--ipam", "multi-pool", "--enable-ipv6=true"],
    );
    agent.start();
    let web = add(&agent, "default", "web");
    assert!(
        web.ips.iter().any(std::net::IpAddr::is_ipv6),
        "dual-stack: {:?}",
        web.ips
    );
    agent.stop();
    agent.flags = ["--ipam", "multi-pool", "--enable-ipv6=false"]
        .map(str::to_owned)
        .to_vec();
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(20));
    let log = agent.log();
    assert!(
        code.is_some_and(|c| c != 0),
        "IPv6 records with IPv6 now off must refuse the start ({code:?}):\n{log}"
    );
    let refusal = log.rsplit("weft-agent ready").next().unwrap_or_default();
    for needle in [&agent.state.display().to_string(), "ipv6", "enable-ipv6"] {
        assert!(
            refusal.contains(needle),
            "the refusal must name {needle}:\n{refusal}"
        );
    }
}
