//! The documentation checks on snippets: each kind of mistake is found, and correct text
//! passes, so `readme_and_docs_pass_the_checks` can fail.

use std::path::Path;

use weft_tests::docs::{
    self,
    check::{Checker, Finding, enum_variants, heading_slugs},
};

fn check(text: &str) -> Vec<Finding> {
    Checker::for_repo(&docs::repo_root()).check_text(Path::new("docs/snippet.md"), text)
}

/// Panics unless `text` gives exactly one finding, containing `expected`.
fn one_finding(text: &str, expected: &str) {
    let findings = check(text);
    assert_eq!(findings.len(), 1, "{text:?}: {findings:?}");
    assert!(
        findings[0].message.contains(expected),
        "{text:?}: {:?} does not say {expected:?}",
        findings[0].message
    );
}

/// Panics unless some finding of `text` contains `expected`.
fn finds(text: &str, expected: &str) {
    let findings = check(text);
    assert!(
        findings.iter().any(|f| f.message.contains(expected)),
        "{text:?}: no finding says {expected:?}: {findings:?}"
    );
}

#[test]
fn correct_text_passes() {
    let text = "\
# Title

See [the operator](operator.md), [its HA](operator.md#high-availability), [here](#title)
and [the README](../README.md). `[not a link](nowhere.md)` is code.

```sh
weft-agent run --node-name node1 --store examples/store --ipam multi-pool
sudo ./target/release/weft-agent bpf endpoint list -o json   # --not-checked in a comment
NODE_NAME=a weft-agent status --socket /tmp/s | head
weft-operator --ipam azure --leader-election=false --cluster-pool-ipv4-cidr 10.0.0.0/8
cargo xtask bench masq net
cargo xtask demo --keep
bpftool map dump pinned /sys/fs/bpf/weft/weft_eps_v1
kubectl -n kube-system logs ds/weft-agent
kubectl -n kube-system exec ds/weft-agent -- weft-agent status
cargo build -p weft-agent -p weft-operator
until target/release/weft-agent status >/dev/null; do sleep 0.2; done
agent/     weft-agent and weft-cni: config, ipam
```
";
    assert_eq!(check(text), Vec::new());
}

#[test]
fn unknown_subcommands_are_found() {
    one_finding(
        "```\nweft-agent bpf endpoints list\n```\n",
        "no subcommand endpoints",
    );
    one_finding("```\nweft-agent bpf\n```\n", "needs a subcommand");
    one_finding("```\n$ weft-agent stats\n```\n", "no subcommand stats");
    one_finding(
        "```\ncargo xtask tests\n```\n",
        "cargo xtask has no subcommand tests",
    );
    one_finding("```\ncargo xtask bench cpu\n```\n", "no target cpu");
}

#[test]
fn unknown_flags_are_found() {
    one_finding(
        "```\nweft-agent run --node-name n \\\n    --no-such-flag 1\n```\n",
        "no flag --no-such-flag",
    );
    one_finding(
        "```\nweft-operator --ipam-mode azure\n```\n",
        "no flag --ipam-mode",
    );
    one_finding("```\nweft-agent status -x\n```\n", "no flag -x");
    one_finding(
        "```\nkubectl exec ds/weft-agent -- weft-agent status --sock s\n```\n",
        "no flag --sock",
    );
}

#[test]
fn unknown_map_names_are_found() {
    one_finding(
        "Counters are in `weft_ctrs_v1`.\n",
        "map weft_ctrs_v1 does not exist",
    );
    one_finding(
        "```\nbpftool map dump pinned /sys/fs/bpf/weft/weft_eps_v9\n```\n",
        "weft_eps_v9",
    );
}

#[test]
fn bad_links_are_found() {
    finds(
        "[spec](../../shared/spec/datapath.md)\n",
        "outside the repository",
    );
    finds(
        "[spec](../../shared/spec/datapath.md)\n",
        "leaves the repository",
    );
    one_finding("[up](../../etc/passwd)\n", "leaves the repository");
    one_finding("[gone](missing.md)\n", "docs/missing.md does not exist");
    one_finding(
        "[anchor](operator.md#no-such-heading)\n",
        "no heading with the anchor",
    );
    one_finding("[web](https://docs.cilium.io/)\n", "leaves the repository");
    one_finding("[abs](/etc/hosts)\n", "absolute");
    one_finding("# Title\n[here](#titel)\n", "this file has no heading");
}

#[test]
fn slugs_and_variants_follow_their_sources() {
    assert_eq!(
        heading_slugs("# A `b` c!\n## Two\n```\n# not a heading\n```\n## Two\n"),
        ["a-b-c", "two", "two-1"]
    );
    let source = "enum Command {\n    /// Doc.\n    Setup,\n    GenCrds,\n    Test(Args),\n}\n";
    assert_eq!(
        enum_variants(source, "enum Command"),
        ["setup", "gen-crds", "test"]
    );
}
