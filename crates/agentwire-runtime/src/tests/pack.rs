//! What a pack agent's handler adds to the loop: instructions made for each
//! turn, and a limit on what the model writes.

use std::sync::Arc;

use agentwire_core::{ErrorCode, Metadata, TurnFailure};

use super::{Scripted, run_turn, says, settings};
use crate::{PastLimit, ReplyLimit, Roster, RuntimeHandler, TurnInstructions};

/// Instructions that name the turn's scenario, or refuse a turn without
/// one.
struct ByScenario;

impl TurnInstructions for ByScenario {
    fn render(&self, metadata: &Metadata) -> Result<String, TurnFailure> {
        match metadata.get("mock_scenario") {
            Some(scenario) if scenario != "refuse" => Ok(format!("You serve {scenario}.")),
            _ => Err(TurnFailure::new(ErrorCode::InvalidMessage, "no scenario")),
        }
    }
}

fn agent(
    model: &Arc<Scripted>,
    edit: impl FnOnce(&mut crate::RuntimeSettings),
) -> Arc<RuntimeHandler> {
    let mut settings = settings("packed", model.clone(), &Roster::new(), &[], &[]);
    edit(&mut settings);
    Arc::new(RuntimeHandler::new(settings))
}

#[tokio::test]
async fn instructions_made_for_the_turn_win_and_see_its_metadata() {
    let model = Scripted::new(|_| says("ok"));
    let handler = agent(&model, |s| s.turn_instructions = Some(Arc::new(ByScenario)));
    let outcome = run_turn(handler, "hi").await;
    assert_eq!(outcome.reply().text, "ok");
    let system = model.requests()[0].system.clone();
    assert_eq!(system.as_deref(), Some("You serve team."));
}

#[tokio::test]
async fn a_long_reply_is_cut_where_the_limit_is_before_it_is_streamed_or_stored() {
    let model = Scripted::new(|_| says("abcdéfghij"));
    let handler = agent(&model, |s| {
        s.reply_limit = Some(ReplyLimit {
            max_characters: 5,
            past_it: PastLimit::Cut,
        });
    });
    let outcome = run_turn(handler, "hi").await;
    assert_eq!(outcome.shape(), ["text abcdé", "completed abcdé"]);
}

#[tokio::test]
async fn a_long_reply_fails_the_turn_when_the_limit_says_so() {
    let model = Scripted::new(|_| says("abcdefghij"));
    let handler = agent(&model, |s| {
        s.reply_limit = Some(ReplyLimit {
            max_characters: 3,
            past_it: PastLimit::Fail("too long".to_owned()),
        });
    });
    let outcome = run_turn(handler, "hi").await;
    assert_eq!(outcome.shape(), ["text abc", "failed too long"]);
}
