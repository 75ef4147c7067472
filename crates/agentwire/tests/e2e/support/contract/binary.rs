//! The binary OMNI frames as a document describes them (`x-omni-frame`:
//! the header's fields by offset and size, the flag bits, the message
//! types, the metadata's schema), read from the document itself, so a frame
//! the server writes that the document does not describe fails the test
//! that saw it.

use serde_json::Value;

use super::resolve;

/// One document's description of a binary frame.
pub struct OmniFrame {
    /// `(offset, size)` of each header field, by name.
    fields: Vec<(String, usize, usize)>,
    header_len: usize,
    /// The bits `x-flags` names; any other bit set is undescribed.
    flag_mask: u64,
    message_types: Vec<u64>,
    metadata: jsonschema::Validator,
}

impl OmniFrame {
    /// The description `frame` (an `OmniFrame` schema) of `document`.
    ///
    /// # Panics
    ///
    /// If the description lacks a part this reads, or its metadata schema
    /// does not compile.
    pub fn compile(document: &Value, frame: &Value, name: &str) -> OmniFrame {
        let fields: Vec<(String, usize, usize)> = frame["x-header"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: x-omni-frame has no x-header"))
            .iter()
            .map(|field| {
                let number = |key: &str| {
                    field[key]
                        .as_u64()
                        .unwrap_or_else(|| panic!("{name}: {field} has no {key}"))
                        as usize
                };
                let field_name = field["name"].as_str().unwrap_or_default().to_owned();
                (field_name, number("offset"), number("size"))
            })
            .collect();
        let header_len = fields
            .iter()
            .map(|(_, at, size)| at + size)
            .max()
            .unwrap_or(0);
        let numbers = |key: &str, value: &str| -> Vec<u64> {
            frame[key]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: x-omni-frame has no {key}"))
                .iter()
                .filter_map(|entry| entry[value].as_u64())
                .collect()
        };
        let flag_mask = numbers("x-flags", "mask")
            .iter()
            .fold(0, |all, mask| all | mask);
        let message_types = numbers("x-message-types", "value");
        let (pointer, _) = resolve(document, &frame["x-metadata"], name);
        let mut root = document.clone();
        root["$ref"] = Value::String(format!("#{pointer}"));
        let metadata = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft7)
            .build(&root)
            .unwrap_or_else(|e| panic!("{name}: the OMNI metadata schema does not compile: {e}"));
        OmniFrame {
            fields,
            header_len,
            flag_mask,
            message_types,
            metadata,
        }
    }

    /// `Ok` when `bytes` is a frame as described; `Err` says why not.
    pub fn check(&self, bytes: &[u8]) -> Result<(), String> {
        if bytes.len() < self.header_len {
            return Err(format!(
                "{} bytes, shorter than the {}-byte header",
                bytes.len(),
                self.header_len
            ));
        }
        if self.field(bytes, "magic")? != u64::from_be_bytes(*b"\0\0\0\0OMNI") {
            return Err(format!("magic {:?}, not OMNI", &bytes[..4]));
        }
        if self.field(bytes, "version")? != 1 {
            return Err(format!("version {}", self.field(bytes, "version")?));
        }
        let flags = self.field(bytes, "flags")?;
        if flags & !self.flag_mask != 0 {
            return Err(format!(
                "flags {flags:#04x} set a bit the document does not name"
            ));
        }
        let kind = self.field(bytes, "message_type")?;
        if !self.message_types.contains(&kind) {
            return Err(format!(
                "message type {kind}, not one of {:?}",
                self.message_types
            ));
        }
        let metadata_len = self.field(bytes, "metadata_len")? as usize;
        let payload_len = self.field(bytes, "payload_len")? as usize;
        if self.header_len + metadata_len + payload_len != bytes.len() {
            return Err(format!(
                "{} bytes, but the header says {} + {metadata_len} + {payload_len}",
                bytes.len(),
                self.header_len
            ));
        }
        let metadata = &bytes[self.header_len..self.header_len + metadata_len];
        let metadata: Value = serde_json::from_slice(metadata)
            .map_err(|e| format!("the metadata is not JSON: {e}"))?;
        let violations: Vec<String> = self
            .metadata
            .iter_errors(&metadata)
            .map(|e| e.to_string())
            .collect();
        match violations.is_empty() {
            true => Ok(()),
            false => Err(format!("metadata {metadata}: {}", violations.join("; "))),
        }
    }

    /// The header field `name` as a big-endian number (at most 8 bytes).
    fn field(&self, bytes: &[u8], name: &str) -> Result<u64, String> {
        let (_, at, size) = self
            .fields
            .iter()
            .find(|(field, _, _)| field == name)
            .ok_or_else(|| format!("the header has no field {name}"))?;
        Ok(bytes[*at..at + size]
            .iter()
            .take(8)
            .fold(0, |number, byte| number << 8 | u64::from(*byte)))
    }
}
