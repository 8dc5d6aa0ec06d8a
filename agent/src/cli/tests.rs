//! Tests of the command line: Cilium's spellings and bare boolean flags parse as weft's.

use clap::Parser as _;

use super::{Cli, Command, RunArgs, parse_listen_addr};
use crate::datapath::DEFAULT_PIN_DIR;

/// `weft-agent <global> run --node-name n <run>`, parsed.
fn run(global: &[&str], run: &[&str]) -> (Cli, RunArgs) {
    let args = ["weft-agent"]
        .iter()
        .chain(global)
        .chain(&["run", "--node-name", "n"])
        .chain(run);
    let mut cli = Cli::try_parse_from(args)
        .unwrap_or_else(|e| panic!("{global:?} run {run:?} is refused: {e}"));
    let command = std::mem::replace(
        &mut cli.command,
        Command::Status {
            output: super::Output::Table,
            socket: "".into(),
        },
    );
    let Command::Run(args) = command else {
        panic!("not run")
    };
    (cli, args)
}

#[test]
fn bare_boolean_flags_mean_true_as_in_cilium() {
    let (_, args) = run(&[], &["--enable-ipv6", "--ipam", "multi-pool"]);
    let flags = args.config.flags();
    assert_eq!(flags["enable-ipv6"], "true");
    assert_eq!(flags["ipam"], "multi-pool");
    let (_, args) = run(&[], &["--enable-bpf-masquerade"]);
    assert_eq!(args.config.flags()["enable-bpf-masquerade"], "true");
    let (_, args) = run(&[], &["--enable-ipv6=false", "--enable-ipv4", "true"]);
    let flags = args.config.flags();
    assert_eq!(flags["enable-ipv6"], "false");
    assert_eq!(flags["enable-ipv4"], "true");
    let (_, args) = run(&[], &[]);
    assert!(args.config.flags().is_empty(), "no flag, no key");
}

#[test]
fn cilium_s_flag_names_are_accepted() {
    let (_, args) = run(
        &[],
        &[
            "--socket-path",
            "/run/x.sock",
            "--k8s-kubeconfig-path",
            "/etc/kc",
        ],
    );
    assert_eq!(args.socket, std::path::Path::new("/run/x.sock"));
    assert_eq!(
        args.kubeconfig.as_deref(),
        Some(std::path::Path::new("/etc/kc"))
    );
    let (cli, _) = run(&["--bpf-root", "/mnt/bpf"], &[]);
    assert_eq!(cli.pin_dir(), std::path::Path::new("/mnt/bpf/weft"));
    let (cli, _) = run(&[], &[]);
    assert_eq!(cli.pin_dir(), std::path::Path::new(DEFAULT_PIN_DIR));
    let both = Cli::try_parse_from([
        "weft-agent",
        "--bpf-root",
        "/mnt/bpf",
        "--pin-dir",
        "/mnt/bpf/x",
        "bpf",
        "counters",
    ]);
    assert!(
        both.is_err(),
        "--bpf-root and --pin-dir together must be refused"
    );
}

#[test]
fn the_node_name_falls_back_to_cilium_s_variable() {
    use super::{CliError, node_name_from};
    let name = |given: Option<&str>, k8s: Option<&str>| {
        node_name_from(given.map(str::to_owned), k8s.map(str::to_owned))
    };
    assert_eq!(name(Some("a"), Some("b")).expect("given"), "a");
    assert_eq!(name(None, Some("b")).expect("K8S_NODE_NAME"), "b");
    assert_eq!(name(Some(""), Some("b")).expect("empty flag"), "b");
    let error = name(None, Some("")).expect_err("none");
    assert!(matches!(error, CliError::NoNodeName));
    let text = error.to_string();
    assert!(
        text.contains("--node-name") && text.contains("K8S_NODE_NAME"),
        "{text}"
    );
}

#[test]
fn listen_addresses_take_cilium_s_port_only_form() {
    assert_eq!(
        parse_listen_addr(":9962").expect("port only"),
        "0.0.0.0:9962".parse().expect("addr")
    );
    assert_eq!(
        parse_listen_addr("127.0.0.1:9090").expect("host:port"),
        "127.0.0.1:9090".parse().expect("addr")
    );
    assert_eq!(
        parse_listen_addr("[::1]:9962").expect("IPv6"),
        "[::1]:9962".parse().expect("addr")
    );
    let error = parse_listen_addr("9962").expect_err("no colon").to_string();
    assert!(error.contains("host:port or :port"), "{error}");
}

/// `weft-agent <args>` parsed with [`super::command`], as the binary parses it.
fn parsed(args: &[&str]) -> Cli {
    let matches = super::command()
        .try_get_matches_from(std::iter::once("weft-agent").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?} is refused: {e}"));
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[test]
fn subcommands_show_only_the_datapath_flags_they_use() {
    let mut root = super::command();
    root.build();
    let mut help = |path: &[&str]| {
        let mut command = &mut root;
        for name in path {
            command = command
                .find_subcommand_mut(name)
                .unwrap_or_else(|| panic!("no subcommand {name}"));
        }
        command.render_long_help().to_string()
    };
    for (path, pin_dir, attach_mode) in [
        (&["run"][..], true, true),
        (&["pod", "add"], true, true),
        (&["bpf", "endpoint", "list"], true, false),
        (&["cleanup"], true, false),
        (&["status"], false, false),
        (&["ipam", "simulate"], false, false),
        (&["ipam", "explain"], false, false),
        (&["cni", "install"], false, false),
    ] {
        let text = help(path);
        assert_eq!(
            text.contains("--pin-dir <"),
            pin_dir,
            "{path:?} --pin-dir:\n{text}"
        );
        assert_eq!(
            text.contains("--bpf-root <"),
            pin_dir,
            "{path:?} --bpf-root:\n{text}"
        );
        assert_eq!(
            text.contains("--attach-mode <"),
            attach_mode,
            "{path:?} --attach-mode:\n{text}"
        );
    }
}

#[test]
fn datapath_flags_are_still_taken_before_or_after_the_subcommand() {
    for args in [
        &["--pin-dir", "/p", "bpf", "endpoint", "list"][..],
        &["bpf", "endpoint", "list", "--pin-dir", "/p"],
        &["--pin-dir", "/p", "status"],
    ] {
        assert_eq!(
            parsed(args).pin_dir(),
            std::path::Path::new("/p"),
            "{args:?}"
        );
    }
}
