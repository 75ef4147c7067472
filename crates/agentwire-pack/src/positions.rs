//! Where each node of a source text starts, by JSON path (`prompts.chat`,
//! `prompts.chat.variables[0].name`), so a diagnostic about a path can
//! name a line and a column. JSON is YAML's flow style, so one event
//! parser serves both forms. A mapping entry is placed at its key, a
//! sequence item at the item. Lines and columns count from 1.

use std::collections::HashMap;

use serde_saphyr::granit_parser::{Event, Parser};

/// A line and a column, from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

/// The start of every node of one text, by path.
#[derive(Debug, Default)]
pub(crate) struct Positions {
    by_path: HashMap<String, Position>,
}

enum Frame {
    Map { path: String, key: Option<String> },
    Seq { path: String, next: usize },
}

/// `parent.key`, or `key` at the root.
pub(crate) fn child(parent: &str, key: &str) -> String {
    match parent.is_empty() {
        true => key.to_owned(),
        false => format!("{parent}.{key}"),
    }
}

/// `parent[index]`.
pub(crate) fn item(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

impl Positions {
    /// The positions in `text`; as many as parse (none past a syntax
    /// error, which the parse of the document reports itself).
    pub(crate) fn of(text: &str) -> Positions {
        let mut by_path = HashMap::new();
        let mut frames: Vec<Frame> = Vec::new();
        for event in Parser::new_from_str(text) {
            let Ok((event, span)) = event else { break };
            let at = Position {
                line: u32::try_from(span.start.line()).unwrap_or(u32::MAX),
                column: u32::try_from(span.start.col() + 1).unwrap_or(u32::MAX),
            };
            match event {
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let path = node_path(&frames);
                    if let Some(path) = &path {
                        by_path.entry(path.clone()).or_insert(at);
                    }
                    let path = path.unwrap_or_default();
                    frames.push(match event {
                        Event::MappingStart(..) => Frame::Map { path, key: None },
                        _ => Frame::Seq { path, next: 0 },
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    frames.pop();
                    advance(&mut frames, None);
                }
                Event::Scalar(value, ..) => {
                    match node_path(&frames) {
                        Some(path) => {
                            by_path.entry(path).or_insert(at);
                            advance(&mut frames, None);
                        }
                        None => {
                            // A key: its entry is placed where the key is.
                            if let Some(Frame::Map { path, .. }) = frames.last() {
                                by_path.insert(child(path, &value), at);
                            }
                            advance(&mut frames, Some(value.into_owned()));
                        }
                    }
                }
                Event::Alias(_) => advance(&mut frames, None),
                _ => {}
            }
        }
        Positions { by_path }
    }

    /// Where `path` starts, else where its nearest ancestor that is in the
    /// text starts (a missing key is reported where its object is).
    pub(crate) fn find(&self, path: &str) -> Option<Position> {
        let mut path = path;
        loop {
            if let Some(found) = self.by_path.get(path) {
                return Some(*found);
            }
            if path.is_empty() {
                return None;
            }
            path = parent(path);
        }
    }
}

/// `a.b[2]` → `a.b`, `a.b` → `a`, `a` → ``.
fn parent(path: &str) -> &str {
    match path.rfind(['.', '[']) {
        Some(cut) => &path[..cut],
        None => "",
    }
}

/// The path of the node that comes next; `None` in a key position.
fn node_path(frames: &[Frame]) -> Option<String> {
    match frames.last() {
        None => Some(String::new()),
        Some(Frame::Map { key: None, .. }) => None,
        Some(Frame::Map {
            path,
            key: Some(key),
        }) => Some(child(path, key)),
        Some(Frame::Seq { path, next }) => Some(item(path, *next)),
    }
}

/// Moves the innermost collection past one node (`key`: it was a key).
fn advance(frames: &mut [Frame], key: Option<String>) {
    match frames.last_mut() {
        Some(Frame::Map { key: slot, .. }) => {
            *slot = match slot {
                None => Some(key.unwrap_or_else(|| "?".to_owned())),
                Some(_) => None,
            }
        }
        Some(Frame::Seq { next, .. }) => *next += 1,
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: u32, column: u32) -> Option<Position> {
        Some(Position { line, column })
    }

    #[test]
    fn yaml_keys_and_items_are_placed_from_one() {
        let text = "id: x\nprompts:\n  chat:\n    variables:\n      - name: a\n      - name: b\n";
        let positions = Positions::of(text);
        assert_eq!(positions.find("id"), at(1, 1));
        assert_eq!(positions.find("prompts.chat"), at(3, 3));
        assert_eq!(positions.find("prompts.chat.variables[1]"), at(6, 9));
        assert_eq!(positions.find("prompts.chat.variables[1].name"), at(6, 9));
        // Not in the text: its nearest ancestor.
        assert_eq!(positions.find("prompts.chat.version"), at(3, 3));
    }

    #[test]
    fn json_is_placed_too() {
        let text = "{\n  \"id\": \"x\",\n  \"prompts\": {\"chat\": {\"version\": 1}}\n}";
        let positions = Positions::of(text);
        assert_eq!(positions.find("id"), at(2, 3));
        assert_eq!(positions.find("prompts.chat.version"), at(3, 24));
    }
}
