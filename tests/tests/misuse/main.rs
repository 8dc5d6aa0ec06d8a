//! weft used the wrong way, as a platform engineer might by mistake: each test reproduces one
//! misuse and checks that weft refuses it out loud and loses nothing.
//!
//! - [`config`]: a ConfigMap manifest given to `--config` is used (and said so), a file that is
//!   no configuration is refused naming it, misspelt keys get one warning with the closest key,
//!   Cilium's names and bare boolean flags work, `delegated-plugin` and bad values stop the agent
//!   before it says it serves, its log is plain text and SIGTERM removes its socket.
//! - [`features`]: Cilium's default Helm-rendered cilium-config stops the agent before it serves,
//!   naming each feature weft lacks and the way out; `--allow-unsupported-features` runs it
//!   with a warning per refused key; a refused key in a CiliumNodeConfig stops it too.
//! - [`inspect`]: `weft-agent bpf …` pointed at a directory where no agent pinned its maps
//!   creates nothing there (no pins, no bpffs mount) and says which `--pin-dir` to use; pointed
//!   at a running agent's, it leaves that agent's programs and links as they are.
//! - [`ipam`]: bad CiliumNode entries, a pod naming a pool that does not exist and records a new
//!   configuration can never restore are named in the log, `status`, `simulate` and `explain`;
//!   the planner and `explain` exit non-zero for a store, node, pod or pool that does not exist.
//! - [`live_sandbox`]: an ADD of a wired container id in another namespace, while the first
//!   one lives, is refused naming both and touches neither.
//! - [`logging`]: `--log-format json` prints JSON lines, an error is printed once, and an
//!   unparsable `RUST_LOG` is refused with the reason.
//! - [`lost_pins`]: a restart that finds none of the old pins rewires every recorded pod
//!   before it serves, in both attach modes; a repeated ADD repairs a lost attachment.
//! - [`restore`]: restarts over state that no longer fits: the router comes from the
//!   CiliumNode's `CiliumInternalIP` and is written back there, an address that can never be
//!   restored is reported while new pods proceed, a truncated `router.json` stops the start,
//!   and a queued DEL whose replay fails stays queued.
//! - [`two_agents`]: a second `weft-agent run` on a running agent's state or pin directory
//!   exits at once, naming the first one's PID and the directory, and changes nothing of it.
//!
//! Runs as root.

mod config;
mod features;
mod inspect;
mod ipam;
mod live_sandbox;
mod logging;
mod lost_pins;
mod restore;
mod two_agents;
