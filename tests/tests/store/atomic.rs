//! 7. Atomic writes.

#[allow(clippy::wildcard_imports, reason = "shared test harness")]
use super::*;

// ---------------------------------------------------------------------------------------------
// 7. Atomic writes.

/// Read `path` as a CiliumNode until `stop`; the number of reads, or the first failure.
pub(crate) fn read_until(path: &Path, stop: &AtomicBool) -> Result<usize, String> {
    let mut reads = 0;
    while !stop.load(Ordering::Relaxed) {
        let value = docs::read_value(path).map_err(|e| report(&e))?;
        docs::decode::<CiliumNode>(path, value).map_err(|e| report(&e))?;
        reads += 1;
    }
    Ok(reads)
}

pub(crate) fn weft_tmp_files(root: &Path) -> Vec<PathBuf> {
    walk_files(root)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".weft-tmp"))
        })
        .collect()
}

#[test]
pub(crate) fn atomic_writes_leave_no_temp_files_and_never_a_partial_document() {
    let scratch = Scratch::new();
    let path = scratch.put("ciliumnodes/node1.yaml", CRD_MODE_NODE);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (path, stop) = (path.clone(), Arc::clone(&stop));
        thread::spawn(move || read_until(&path, &stop))
    };
    let rt = current_thread();
    rt.block_on(async {
        // No debounce: the writer task writes whatever a flush did not.
        let store = scratch.open(Duration::ZERO);
        for i in 0..40u32 {
            let ips: Vec<String> = (0..=i % 7).map(|k| format!("10.0.1.{k}")).collect();
            let owner = format!("default/pod{i}");
            let used: Vec<(&str, &str)> =
                ips.iter().map(|ip| (ip.as_str(), owner.as_str())).collect();
            store.write_node(used_write(&used), "");
            if i % 2 == 0 {
                store
                    .flush()
                    .await
                    .unwrap_or_else(|e| panic!("flush {i}: {}", report(&e)));
            }
            eventually(&format!("write {i}"), || {
                (used_in(&path)["10.0.1.0"]["owner"] == owner.as_str()).then_some(())
            })
            .await;
        }
    });
    drop(rt);
    stop.store(true, Ordering::Relaxed);
    let reads = reader
        .join()
        .unwrap_or_else(|_| panic!("the reader thread panicked"))
        .unwrap_or_else(|e| panic!("a reader saw a partial or broken node1.yaml: {e}"));
    assert!(reads > 0, "the reader never read");
    let leftovers = weft_tmp_files(&scratch.root);
    assert!(
        leftovers.is_empty(),
        "temp files left behind: {leftovers:?}"
    );

    // A replacement that fails (the target is a directory) removes its temp file too.
    let blocked = scratch.path("blocked/node1.yaml");
    fs::create_dir_all(blocked.join("inside")).expect("create the blocking directory");
    let result = docs::write_atomic(&blocked, &json!({"kind": "CiliumNode"}));
    assert!(result.is_err(), "replacing a directory succeeded");
    let leftovers = weft_tmp_files(&scratch.root);
    assert!(leftovers.is_empty(), "a failed write left {leftovers:?}");
}
