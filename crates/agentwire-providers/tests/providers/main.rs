//! The providers against in-process fake servers that speak the OpenAI and
//! Anthropic streaming wire formats byte for byte, and the scripted mock.
//!
//! One test binary, by topic:
//!
//! - [`openai`]: the OpenAI streaming format;
//! - [`anthropic`]: the Anthropic streaming format;
//! - [`faults`]: HTTP and stream faults, and which are retried;
//! - [`mock`]: the scripted mock;
//! - [`support`]: the fake server, the recording sink and the wire
//!   transcripts they share.

mod anthropic;
mod faults;
mod mock;
mod openai;
mod support;
