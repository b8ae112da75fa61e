//! The `shadow-reconciler` binary: everything is in [`cli`] and the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
