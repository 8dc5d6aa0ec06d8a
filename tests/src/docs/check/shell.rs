//! The shell side of the documentation checks: splitting a code line into commands, and
//! walking a `weft-agent …` or `weft-operator …` command down its binary's clap tree, checking
//! each subcommand and flag on the way. Pure: it reads no file and runs nothing.

/// The tokens of one command: up to a pipe, `;`, `&&`, `||` or a redirection.
pub(super) fn command_tokens(tokens: &[String]) -> &[String] {
    let end = tokens
        .iter()
        .position(|t| {
            matches!(t.as_str(), "|" | ";" | "&&" | "||" | "&" | "<" | ">" | ">>")
                || t.starts_with("2>")
                || t.starts_with('>')
        })
        .unwrap_or(tokens.len());
    &tokens[..end]
}

/// A token after which a new command starts.
pub(super) fn is_separator(token: &str) -> bool {
    matches!(
        token,
        "|" | "||" | "&&" | "&" | ";" | "--" | "do" | "then" | "else" | "(" | "$("
    )
}

/// A token before a command that leaves the command's start to the next token: `sudo`, a
/// shell keyword, a prompt, or an environment assignment (`NODE_NAME=a`).
pub(super) fn is_prefix(token: &str) -> bool {
    matches!(
        token,
        "sudo" | "$" | "+" | "!" | "time" | "until" | "while" | "if" | "exec" | "env"
    ) || token.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

/// `token` runs `program`: its bare name, or a path to it (`./…`, `/…`, `target/…`).
pub(super) fn is_program(token: &str, program: &str) -> bool {
    token == program
        || token.strip_suffix(program).is_some_and(|dir| {
            dir.ends_with('/')
                && (dir.starts_with('/') || dir.starts_with("./") || dir.contains("target/"))
        })
}

/// The line without a shell comment (`#` at the start or after a blank).
pub(super) fn strip_comment(line: &str) -> &str {
    if line.starts_with('#') {
        return "";
    }
    line.find(" #").map_or(line, |at| &line[..at])
}

/// Walks `args` down `root`'s subcommands and checks every flag on the way.
pub(super) fn check_clap(root: &clap::Command, args: &[String]) -> Vec<String> {
    let name = root.get_name().to_owned();
    let mut path = vec![root];
    let mut problems = Vec::new();
    let mut positional_seen = false;
    let mut help = false;
    let mut skip_next = false;
    for token in args {
        if skip_next {
            skip_next = false;
            continue;
        }
        let here = *path.last().unwrap_or(&root);
        let shown = path
            .iter()
            .map(|c| c.get_name())
            .collect::<Vec<_>>()
            .join(" ");
        if let Some(long) = token.strip_prefix("--") {
            if long.is_empty() {
                break;
            }
            let (long, value) = long
                .split_once('=')
                .map_or((long, None), |(l, v)| (l, Some(v)));
            if matches!(long, "help" | "version") {
                help = true;
                continue;
            }
            if let Some(arg) = find_arg(&path, |a| a.get_long() == Some(long)) {
                skip_next = value.is_none() && takes_value(arg);
            } else {
                // Its value, if it has one, is not a subcommand.
                skip_next = value.is_none();
                problems.push(format!(
                    "`{shown}` has no flag --{long} (see `{shown} --help`)"
                ));
            }
        } else if let Some(shorts) = token.strip_prefix('-').filter(|s| !s.is_empty()) {
            let short = shorts.chars().next().unwrap_or('-');
            if matches!(short, 'h' | 'V') {
                help = true;
                continue;
            }
            match find_arg(&path, |a| a.get_short() == Some(short)) {
                Some(arg) => skip_next = shorts.len() == 1 && takes_value(arg),
                None => problems.push(format!("`{shown}` has no flag -{short}")),
            }
        } else if here.has_subcommands() && !positional_seen {
            let Some(sub) = here.find_subcommand(token) else {
                let subs: Vec<&str> = here
                    .get_subcommands()
                    .map(clap::Command::get_name)
                    .collect();
                problems.push(format!(
                    "`{shown}` has no subcommand {token} (it has: {})",
                    subs.join(", ")
                ));
                return problems;
            };
            path.push(sub);
        } else {
            positional_seen = true;
        }
    }
    let last = *path.last().unwrap_or(&root);
    if last.is_subcommand_required_set() && !help && path.len() > 1 {
        let shown = path
            .iter()
            .map(|c| c.get_name())
            .collect::<Vec<_>>()
            .join(" ");
        problems.push(format!("`{shown}` needs a subcommand"));
    }
    if path.len() == 1 && root.is_subcommand_required_set() && !help && problems.is_empty() {
        problems.push(format!("`{name}` needs a subcommand"));
    }
    problems
}

pub(super) fn takes_value(arg: &clap::Arg) -> bool {
    arg.get_action().takes_values() && !arg.is_require_equals_set()
}

/// The argument `matches` finds on the innermost command of `path` that has one (a
/// subcommand's own flags first, then those it inherits).
fn find_arg<'a>(
    path: &[&'a clap::Command],
    matches: impl Fn(&clap::Arg) -> bool,
) -> Option<&'a clap::Arg> {
    path.iter()
        .rev()
        .flat_map(|c| c.get_arguments())
        .find(|a| matches(a))
}
