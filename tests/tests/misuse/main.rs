//! weft used the wrong way, as a platform engineer might by mistake: each test reproduces one
//! misuse and checks that weft refuses it out loud and loses nothing.
//!
//! - [`inspect`]: `weft-agent bpf …` pointed at a directory where no agent pinned its maps
//!   creates nothing there (no pins, no bpffs mount) and says which `--pin-dir` to use; pointed
//!   at a running agent's, it leaves that agent's programs and links as they are.
//! - [`two_agents`]: a second `weft-agent run` on a running agent's state or pin directory
//!   exits at once, naming the first one's PID and the directory, and changes nothing of it.
//!
//! Runs as root.

mod inspect;
mod two_agents;
