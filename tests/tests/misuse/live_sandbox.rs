//! An ADD for a container id weft already wired, but in another network namespace while the
//! first one still lives, is refused naming both namespaces: only a gone sandbox may be
//! replaced. Nothing of the live sandbox is touched.

use weft_tests::{
    NamedNetNs, ThreadNetNs,
    agent::{Agent, add, example_store, ping},
    containerd::pinned_endpoints,
};

#[test]
fn an_add_in_another_netns_leaves_the_live_sandbox_alone() {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &["--ipam", "multi-pool"]);
    agent.start();
    let a = add(&agent, "default", "web");
    let b = add(&agent, "default", "db");
    let before = pinned_endpoints(&agent.pin_dir);

    let other = NamedNetNs::new();
    let (first, second) = (a.netns.path(), other.path());
    let call = agent.cni(
        "ADD",
        &a.id,
        &second.display().to_string(),
        (&a.ns, &a.name),
    );
    assert_ne!(
        call.code, 0,
        "the second sandbox was wired: {}",
        call.stdout
    );
    let text = call.stdout.to_string();
    assert!(
        text.contains(&first.display().to_string()) && text.contains(&second.display().to_string()),
        "the refusal must name both namespaces: {text}"
    );
    assert_eq!(
        pinned_endpoints(&agent.pin_dir),
        before,
        "the refused ADD changed the endpoints"
    );
    assert!(ping(&a, b.ips[0]), "the first sandbox lost its network");
    // The refused ADD left nothing in the second namespace either.
    let links = other
        .command("ip")
        .args(["-o", "link"])
        .output()
        .expect("ip link");
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(
        !links.contains("eth0"),
        "eth0 in the refused namespace:\n{links}"
    );
}
