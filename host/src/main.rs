//! `mote`: the command-line host. See `mote --help`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
