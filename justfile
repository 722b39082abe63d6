# Wrappers over cargo; the README gives the plain commands.

# Build the example actors and run the demo deployment.
demo:
    cargo run --release -p mote-cli -- demo

# The whole test suite (what CI runs).
test:
    cargo test --workspace

# One workload (w1, w2, w3 or all) of the benchmark.
bench workload="all":
    cargo run --release -p mote-bench -- {{workload}}

# Format and lint like CI expects.
fmt:
    cargo fmt --all
    cargo clippy --workspace --all-targets -- -D warnings
