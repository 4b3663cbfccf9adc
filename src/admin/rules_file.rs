//! Changes to the rules file made from the admin interface: a new version written whole
//! (validated first, replaced atomically) and loaded like any reload.

use std::path::Path;

use super::words::Answer;
use crate::backend::MyError;
use crate::shared::{Reload, Shared};

/// Writes a new version of the rules file (validated first, replaced atomically) and loads it.
pub(super) fn edit(
    shared: &Shared,
    path: &Path,
    change: impl FnOnce(&mut toml_edit::DocumentMut),
) -> Result<Answer, MyError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| MyError::new(1105, format!("cannot read {}: {e}", path.display())))?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| MyError::new(1105, format!("{}: invalid TOML: {e}", path.display())))?;
    change(&mut doc);
    let running = shared.topology().version;
    let file_version = doc
        .get("version")
        .and_then(|v| v.as_integer())
        .unwrap_or(0)
        .max(0) as u64;
    let version = running.max(file_version) + 1;
    doc["version"] = toml_edit::value(version as i64);
    let new_text = doc.to_string();
    crate::config::parse(&new_text, &path.display().to_string()).map_err(|e| {
        MyError::new(
            1105,
            format!("change refused, the rules stay as they are: {e}"),
        )
    })?;
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, &new_text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| MyError::new(1105, format!("cannot write {}: {e}", path.display())))?;
    match shared.reload_file(path) {
        Reload::Applied { to, .. } => Ok(Answer::Done(format!(
            "rules version {to} written and applied"
        ))),
        Reload::Ignored { running, .. } => Ok(Answer::Done(format!(
            "rules version {version} written; version {running} was already in force"
        ))),
        Reload::Refused(reason) => Err(MyError::new(1105, reason)),
    }
}

/// Whether the rules file at `path` with the metadata's `rows` over it is valid rules: a
/// change checked before it is written to the metadata.
pub(super) fn check_merged(path: &Path, rows: &crate::metadata::Rows) -> Result<(), MyError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| MyError::new(1105, format!("{}: {e}", path.display())))?;
    let merged = crate::metadata::merge_into(&text, rows).map_err(|e| MyError::new(1235, e))?;
    crate::config::parse(&merged, "the rules with this change").map_err(|e| {
        MyError::new(
            1105,
            format!("change refused, the rules stay as they are: {e}"),
        )
    })?;
    Ok(())
}
