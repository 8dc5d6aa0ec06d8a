//! Injected faults: 429 with `Retry-After` for a count or a time window, 500 and 404 for a path,
//! added latency; the request log's statuses and counters show them.

use std::time::{Duration, Instant};

use weft_tests::azure::{ArmEmulator, Fault, Operation};

use super::{Client, S, VMSS, scenario, v};

#[test]
fn throttling_answers_429_with_retry_after_for_a_count() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    emulator.inject(Fault::throttle(Some(Operation::NicList), 7).times(2));
    let nics = v(&format!("{S}/Microsoft.Network/networkInterfaces"));
    for _ in 0..2 {
        let r = client.get(&nics).expect(429);
        assert_eq!(r.header("retry-after").as_deref(), Some("7"));
        assert_eq!(r.code(), "SubscriptionRequestsThrottled");
    }
    client.get(&nics).expect(200);
    // Other operations were never throttled.
    client
        .get(&v(&format!(
            "{S}/Microsoft.Compute/virtualMachineScaleSets"
        )))
        .expect(200);
    assert_eq!(emulator.log().count_status(Operation::NicList, 429), 2);
    assert_eq!(emulator.log().count_status(Operation::NicList, 200), 1);
    let statuses: Vec<u16> = emulator
        .requests()
        .iter()
        .filter(|r| r.operation == Operation::NicList)
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [429, 429, 200]);
}

#[test]
fn throttling_for_a_time_window_ends() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    emulator.inject(Fault::throttle(None, 1).for_duration(Duration::from_millis(300)));
    let sets = v(&format!("{S}/Microsoft.Compute/virtualMachineScaleSets"));
    client.get(&sets).expect(429);
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.get(&sets).status == 429 {
        assert!(Instant::now() < deadline, "still throttled after 5 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    client.get(&sets).expect(200);
}

#[test]
fn errors_and_latency_by_path() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    let one = v(&format!(
        "{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/1/networkInterfaces"
    ));
    let zero = v(&format!(
        "{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/0/networkInterfaces"
    ));
    emulator.inject(Fault::not_found(None).path("/virtualMachines/1/").times(1));
    emulator.inject(
        Fault::internal(Some(Operation::VmssVmNicList))
            .method("GET")
            .times(1),
    );
    assert_eq!(client.get(&one).expect(404).code(), "ResourceNotFound");
    assert_eq!(client.get(&zero).expect(500).code(), "InternalServerError");
    client.get(&one).expect(200);
    client.get(&zero).expect(200);
    emulator.inject(Fault::latency(
        Some(Operation::SubnetGet),
        Duration::from_millis(300),
    ));
    let start = Instant::now();
    client
        .get(&v(&format!(
            "{S}/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet"
        )))
        .expect(200);
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
    emulator.clear_faults();
    let start = Instant::now();
    client
        .get(&v(&format!(
            "{S}/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet"
        )))
        .expect(200);
    assert!(
        start.elapsed() < Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
}
