//! `agentwire pack compile PATH [--output FILE]`: a PromptPack compiled as
//! an agent would compile it, for its authors and their CI. It prints each
//! problem as `FILE:LINE:COLUMN: error: PATH: MESSAGE` (`FILE: error: PATH:
//! MESSAGE` where the position is unknown), each warning as `FILE: warning:
//! PATH: MESSAGE`, then a summary line; with `--output`, the compiled pack
//! is written as canonical JSON. The checks are the pack's own: what an
//! agent's config adds (its provider's parameters, its tools) is checked
//! by `check-config` and at startup.

use std::io::Write;
use std::path::Path;

/// How the command ended: its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The pack compiled, with or without warnings: 0.
    Compiled,
    /// It did not (or could not be read, or written out): 1.
    Failed,
}

/// Compiles the pack at `path`, printing to `out`; writes it to `output`
/// when it compiles.
pub fn run(path: &Path, output: Option<&Path>, out: &mut dyn Write) -> std::io::Result<Outcome> {
    let file = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            writeln!(out, "{file}: error: cannot read: {e}")?;
            return Ok(Outcome::Failed);
        }
    };
    match agentwire_pack::compile(&text, &file) {
        Ok(compiled) => {
            for warning in &compiled.warnings {
                writeln!(out, "{file}: warning: {warning}")?;
            }
            let pack = &compiled.pack;
            if let Some(output) = output
                && let Err(e) = std::fs::write(output, pack.canonical_json())
            {
                writeln!(out, "{}: error: cannot write: {e}", output.display())?;
                return Ok(Outcome::Failed);
            }
            writeln!(
                out,
                "{file}: compiled pack {} {}: {} prompt(s), {} warning(s)",
                pack.id,
                pack.version,
                pack.prompts.len(),
                compiled.warnings.len()
            )?;
            Ok(Outcome::Compiled)
        }
        Err(failed) => {
            for diagnostic in &failed.diagnostics {
                let at = diagnostic.location(&file);
                writeln!(
                    out,
                    "{at}: error: {}: {}",
                    diagnostic.path, diagnostic.message
                )?;
            }
            for warning in &failed.warnings {
                writeln!(out, "{file}: warning: {warning}")?;
            }
            writeln!(
                out,
                "{file}: did not compile: {} error(s), {} warning(s)",
                failed.diagnostics.len(),
                failed.warnings.len()
            )?;
            Ok(Outcome::Failed)
        }
    }
}
