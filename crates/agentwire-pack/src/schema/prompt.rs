//! A prompt's shape: its variables, tool policy, pipeline, parameters,
//! validators and test records.

use serde_json::Value;

use super::formats::is_date;
use super::{Check, NAME, PROMPT_ID, PROMPT_KEYS, Shape, Str, VARIABLE_KEYS, VARIABLE_TYPES};

impl Check {
    pub(super) fn prompt(&mut self, path: &str, value: &Value) {
        let shape = Shape {
            required: &["id", "name", "version", "system_template"],
            known: Some(PROMPT_KEYS),
        };
        let Some(map) = self.object(path, value, &shape) else {
            return;
        };
        self.field(map, path, "id", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 0,
                    max: None,
                    pattern: Some(PROMPT_ID),
                },
            );
        });
        self.field(map, path, "name", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 1,
                    max: None,
                    pattern: None,
                },
            );
        });
        self.field(map, path, "description", Check::text);
        self.field(map, path, "version", Check::version);
        self.field(map, path, "system_template", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 1,
                    max: None,
                    pattern: None,
                },
            );
        });
        self.field(map, path, "variables", |c, p, v| {
            c.items(p, v, Check::variable)
        });
        self.field(map, path, "tools", Check::strings);
        self.field(map, path, "tool_policy", Check::tool_policy);
        self.field(map, path, "pipeline", Check::pipeline);
        self.field(map, path, "parameters", Check::parameters);
        self.field(map, path, "validators", |c, p, v| {
            c.items(p, v, Check::validator)
        });
        self.field(map, path, "evals", Check::any_array);
        self.field(map, path, "tested_models", |c, p, v| {
            c.items(p, v, Check::tested_model)
        });
        self.field(map, path, "model_overrides", |c, p, v| {
            c.entries(p, v, 0, Check::any_object)
        });
        self.field(map, path, "media", |c, p, v| {
            let shape = Shape {
                required: &["enabled"],
                known: None,
            };
            if let Some(media) = c.object(p, v, &shape) {
                c.field(media, p, "enabled", Check::boolean);
            }
        });
    }

    fn variable(&mut self, path: &str, value: &Value) {
        let shape = Shape {
            required: &["name", "type", "required"],
            known: Some(VARIABLE_KEYS),
        };
        let Some(map) = self.object(path, value, &shape) else {
            return;
        };
        self.field(map, path, "name", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 0,
                    max: None,
                    pattern: Some(NAME),
                },
            );
        });
        self.field(map, path, "type", |c, p, v| c.one_of(p, v, VARIABLE_TYPES));
        self.field(map, path, "required", Check::boolean);
        self.field(map, path, "description", Check::text);
        self.field(map, path, "binding", Check::any_object);
        self.field(map, path, "validation", |c, p, v| {
            let shape = Shape {
                required: &[],
                known: Some(&[
                    "pattern",
                    "min_length",
                    "max_length",
                    "minimum",
                    "maximum",
                    "enum",
                ]),
            };
            let Some(rules) = c.object(p, v, &shape) else {
                return;
            };
            c.field(rules, p, "pattern", Check::text);
            c.field(rules, p, "min_length", |c, p, v| c.integer(p, v, 0));
            c.field(rules, p, "max_length", |c, p, v| c.integer(p, v, 1));
            c.field(rules, p, "minimum", |c, p, v| c.number(p, v, None, None));
            c.field(rules, p, "maximum", |c, p, v| c.number(p, v, None, None));
            c.field(rules, p, "enum", Check::any_array);
        });
    }

    fn tool_policy(&mut self, path: &str, value: &Value) {
        let shape = Shape {
            required: &[],
            known: Some(&[
                "tool_choice",
                "max_rounds",
                "max_tool_calls_per_turn",
                "blocklist",
            ]),
        };
        let Some(map) = self.object(path, value, &shape) else {
            return;
        };
        self.field(map, path, "tool_choice", |c, p, v| {
            c.one_of(p, v, &["auto", "required", "none"])
        });
        self.field(map, path, "max_rounds", |c, p, v| c.integer(p, v, 1));
        self.field(map, path, "max_tool_calls_per_turn", |c, p, v| {
            c.integer(p, v, 1)
        });
        self.field(map, path, "blocklist", Check::strings);
    }

    fn pipeline(&mut self, path: &str, value: &Value) {
        let shape = Shape {
            required: &["stages"],
            known: Some(&["stages", "middleware"]),
        };
        let Some(map) = self.object(path, value, &shape) else {
            return;
        };
        self.field(map, path, "stages", Check::strings);
        self.field(map, path, "middleware", |c, p, v| {
            c.items(p, v, |c, p, v| {
                let shape = Shape {
                    required: &["type"],
                    known: Some(&["type", "config"]),
                };
                if let Some(middleware) = c.object(p, v, &shape) {
                    c.field(middleware, p, "type", Check::text);
                    c.field(middleware, p, "config", Check::any_object);
                }
            });
        });
    }

    fn parameters(&mut self, path: &str, value: &Value) {
        let shape = Shape {
            required: &[],
            known: Some(&[
                "temperature",
                "max_tokens",
                "top_p",
                "top_k",
                "frequency_penalty",
                "presence_penalty",
            ]),
        };
        let Some(map) = self.object(path, value, &shape) else {
            return;
        };
        self.field(map, path, "temperature", |c, p, v| {
            c.number(p, v, Some(0.0), Some(2.0))
        });
        self.field(map, path, "max_tokens", |c, p, v| c.integer(p, v, 1));
        self.field(map, path, "top_p", |c, p, v| {
            c.number(p, v, Some(0.0), Some(1.0))
        });
        self.field(map, path, "top_k", |c, p, v| {
            if !v.is_null() {
                c.integer(p, v, 1);
            }
        });
        for key in ["frequency_penalty", "presence_penalty"] {
            self.field(map, path, key, |c, p, v| {
                c.number(p, v, Some(-2.0), Some(2.0))
            });
        }
    }

    fn validator(&mut self, path: &str, value: &Value) {
        let shape = Shape {
            required: &["type"],
            known: Some(&["type", "enabled", "message", "fail_on_violation", "params"]),
        };
        let Some(map) = self.object(path, value, &shape) else {
            return;
        };
        self.field(map, path, "type", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 1,
                    max: None,
                    pattern: None,
                },
            );
        });
        self.field(map, path, "enabled", Check::boolean);
        self.field(map, path, "message", Check::text);
        self.field(map, path, "fail_on_violation", Check::boolean);
        self.field(map, path, "params", Check::any_object);
    }

    fn tested_model(&mut self, path: &str, value: &Value) {
        let shape = Shape {
            required: &["provider", "model", "date"],
            known: Some(&[
                "provider",
                "model",
                "date",
                "success_rate",
                "avg_tokens",
                "avg_cost",
                "avg_latency_ms",
                "notes",
            ]),
        };
        let Some(map) = self.object(path, value, &shape) else {
            return;
        };
        for key in ["provider", "model", "notes"] {
            self.field(map, path, key, Check::text);
        }
        self.field(map, path, "date", |c, p, v| c.format(p, v, "date", is_date));
        self.field(map, path, "success_rate", |c, p, v| {
            c.number(p, v, Some(0.0), Some(1.0))
        });
        for key in ["avg_tokens", "avg_cost", "avg_latency_ms"] {
            self.field(map, path, key, |c, p, v| c.number(p, v, Some(0.0), None));
        }
    }
}
