//! A second `weft-agent run` on the state directory or the pin directory of a running one
//! exits at once, naming the first one's PID and the directory, and touches nothing of it.

use std::time::Duration;

use weft_tests::{
    ThreadNetNs,
    agent::{Agent, add, example_store, ping},
    containerd::pinned_endpoints,
};

/// Start a second agent on `first`'s state or pin directory (`same`) and expect it to exit with
/// an error naming `first`'s PID and that directory.
fn second_agent_refused(first: &mut Agent, same: &str) {
    let mut second = Agent::new(&example_store(), &["--ipam", "multi-pool"]);
    // Dropping `second` removes its directories: give its own back before it goes.
    let own = (second.state.clone(), second.pin_dir.clone());
    let dir = if same == "state-dir" {
        second.state.clone_from(&first.state);
        first.state.clone()
    } else {
        second.pin_dir.clone_from(&first.pin_dir);
        first.pin_dir.clone()
    };
    second.spawn();
    let code = second.wait_exit(Duration::from_secs(20));
    let log = second.log();
    (second.state, second.pin_dir) = own;
    assert!(
        code.is_some_and(|code| code != 0),
        "a second agent on the first one's {same} runs ({code:?}):\n{log}"
    );
    let pid = first.pid().expect("the first agent runs");
    assert!(
        log.contains(&format!("PID {pid}")) && log.contains(&dir.display().to_string()),
        "the second agent must name the first one's PID {pid} and {}:\n{log}",
        dir.display()
    );
}

#[test]
fn a_second_agent_on_the_same_state_or_pins_exits_naming_the_first() {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let mut first = Agent::new(&example_store(), &["--ipam", "multi-pool"]);
    first.start();
    let a = add(&first, "default", "web");
    let b = add(&first, "default", "db");
    let before = pinned_endpoints(&first.pin_dir);
    for same in ["state-dir", "pin-dir"] {
        second_agent_refused(&mut first, same);
    }
    assert_eq!(
        before,
        pinned_endpoints(&first.pin_dir),
        "the second agents changed the first one's endpoints"
    );
    assert!(first.running(), "the first agent stopped:\n{}", first.log());
    assert!(
        ping(&a, b.ips[0]),
        "the first agent's pods no longer ping each other"
    );
}
