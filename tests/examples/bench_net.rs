//! Temporary runner.
fn main() -> anyhow::Result<()> {
    let seconds = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    weft_tests::bench::net::run(&weft_tests::bench::net::NetOptions { seconds })
}
