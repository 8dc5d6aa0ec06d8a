//! The instance sync after a round: saved when the cache holds every answer of the round,
//! made when an answer could not be read (and the node is filled either way).

use super::*;

/// Fill n1 (room on its primary ENI) through the cloud manager; the reads of i-1 it took.
async fn fill(fake: &Fake) -> usize {
    let p = EniProvider::new(fake.clone(), EniSettings::default());
    let (manager, mut rx) = manager(p, false, Duration::ZERO).await;
    let reads_before = fake.0.lock().unwrap().instance_reads;
    manager.upsert(CloudNodeView {
        name: "n1".into(),
        instance_id: "i-1".into(),
        provider: spec(0),
        ..CloudNodeView::default()
    });
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let patch = rx.recv().await.expect("manager alive");
            let pool = (patch.spec.as_ref()).and_then(|s| {
                s["spec"]["ipam"]["pool"]
                    .as_object()
                    .map(serde_json::Map::len)
            });
            if pool == Some(8) {
                return;
            }
        }
    })
    .await
    .expect("the node's pool reached pre-allocate 8");
    let ec2 = fake.0.lock().unwrap();
    assert_eq!(
        ec2.calls
            .iter()
            .filter(|c| c.starts_with("assign "))
            .count(),
        1,
        "one assignment fills the node: {:?}",
        ec2.calls
    );
    ec2.instance_reads - reads_before
}

#[tokio::test(start_paused = true)]
async fn a_round_whose_answer_is_in_the_cache_reads_no_instance() {
    let fake = ec2();
    assert_eq!(fill(&fake).await, 0);
}

#[tokio::test(start_paused = true)]
async fn a_round_whose_answer_could_not_be_read_reads_the_instance_again() {
    let fake = ec2();
    fake.0.lock().unwrap().silent_answers = true;
    assert_eq!(fill(&fake).await, 1);
}
