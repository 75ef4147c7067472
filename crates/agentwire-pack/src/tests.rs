use serde_json::{Value, json};

use super::*;

/// The reference's minimal useful pack: one prompt, one tool.
fn useful() -> Value {
    json!({
      "$schema": "https://promptpack.org/schema/latest/promptpack.schema.json",
      "id": "echo-agent", "name": "Echo Agent", "version": "1.0.0",
      "description": "Smallest useful pack: one prompt, one tool.",
      "template_engine": { "version": "v1", "syntax": "{{variable}}" },
      "prompts": {
        "chat": {
          "id": "chat", "name": "Chat", "version": "1.0.0",
          "system_template": "You are {{persona}}. Call get_time when asked the time.",
          "variables": [{ "name": "persona", "type": "string", "required": false, "default": "a concise assistant" }],
          "tools": ["get_time"], "tool_policy": { "tool_choice": "auto", "max_rounds": 3 },
          "parameters": { "temperature": 0.2, "max_tokens": 512 },
          "validators": [{ "type": "max_length", "enabled": true, "params": { "max_characters": 2000 } }]
        }
      },
      "tools": {
        "get_time": { "name": "get_time", "description": "Current time in an IANA timezone",
          "parameters": { "type": "object", "properties": { "tz": { "type": "string" } }, "required": ["tz"] } }
      },
      "metadata": { "domain": "demo", "language": "en", "requires_ai_disclosure": true },
      "compilation": { "compiled_with": "packc-v1.0.0", "created_at": "2026-08-21T00:00:00Z", "schema": "v1" }
    })
}

/// The strict minimum: `sdk/examples/hello/hello.pack.json`'s shape.
fn minimum() -> Value {
    json!({
      "id": "hello", "name": "Hello", "version": "1.0.0",
      "template_engine": { "version": "v1", "syntax": "{{variable}}" },
      "prompts": { "chat": { "id": "chat", "name": "Chat", "version": "1.0.0",
        "system_template": "You are a friendly assistant." } }
    })
}

fn compile_json(document: &Value) -> Result<Compiled, CompileError> {
    compile(
        &serde_json::to_string_pretty(document).unwrap(),
        "pack.json",
    )
}

/// `useful()` changed by `edit`, compiled: its error.
fn refused(edit: impl FnOnce(&mut Value)) -> CompileError {
    let mut document = useful();
    edit(&mut document);
    match compile_json(&document) {
        Ok(_) => panic!("compiled: {document:#}"),
        Err(e) => e,
    }
}

#[test]
fn the_minimal_useful_pack_compiles_without_a_warning() {
    let compiled = compile_json(&useful()).unwrap();
    assert_eq!(compiled.warnings, Vec::<String>::new());
    let pack = &compiled.pack;
    assert_eq!(pack.requires_ai_disclosure(), Some(true));
    let prompt = &pack.prompts["chat"];
    assert_eq!(prompt.offered_tools().collect::<Vec<_>>(), ["get_time"]);
    assert_eq!(
        prompt.max_length(),
        Some(MaxLength {
            max_characters: 2000,
            fail_on_violation: false,
            message: None
        })
    );
    let template = pack.system_template("chat").unwrap();
    assert_eq!(template.names(), ["persona"]);
}

#[test]
fn the_strict_minimum_compiles_with_a_warning_about_compilation() {
    let compiled = compile_json(&minimum()).unwrap();
    assert_eq!(compiled.pack.requires_ai_disclosure(), None);
    assert_eq!(compiled.warnings.len(), 1, "{:?}", compiled.warnings);
    assert!(compiled.warnings[0].starts_with("compilation: missing"));
}

#[test]
fn yaml_is_the_same_document() {
    let yaml = "id: hello\nname: Hello\nversion: 1.0.0\ntemplate_engine: {version: v1, syntax: \"{{variable}}\"}\nprompts:\n  chat:\n    id: chat\n    name: Chat\n    version: 1.0.0\n    system_template: You are a friendly assistant.\n";
    let from_yaml = compile(yaml, "hello.pack.yaml").unwrap();
    let from_json = compile_json(&minimum()).unwrap();
    assert_eq!(from_yaml.pack, from_json.pack);
    // The canonical JSON reads back as the same pack.
    let again = compile(&from_yaml.pack.canonical_json(), "out.json").unwrap();
    assert_eq!(again.pack, from_json.pack);
}

#[test]
fn requires_ai_disclosure_is_accepted_at_the_top_level() {
    let mut document = minimum();
    document["requires_ai_disclosure"] = json!(false);
    assert_eq!(
        compile_json(&document)
            .unwrap()
            .pack
            .requires_ai_disclosure(),
        Some(false)
    );
    document["metadata"] = json!({"requires_ai_disclosure": true});
    let error = compile_json(&document).unwrap_err();
    assert_eq!(error.diagnostics[0].path, "requires_ai_disclosure");
}

/// A change to a document.
type Edit = fn(&mut Value);

/// Each schema rule, broken alone: the path its diagnostic names and a
/// piece of its message.
const SCHEMA_CASES: &[(Edit, &str, &str)] = &[
    (
        |d| drop(d.as_object_mut().unwrap().remove("id")),
        "(root)",
        "id is required",
    ),
    (
        |d| d["id"] = json!("Echo"),
        "id",
        "Does not match pattern '^[a-z][a-z0-9-]*$'",
    ),
    (
        |d| d["version"] = json!("1.0"),
        "version",
        "Does not match pattern 'SemVer",
    ),
    (
        |d| d["prompts"]["chat"]["version"] = json!("one"),
        "prompts.chat.version",
        "SemVer",
    ),
    (
        |d| d["surprise"] = json!(1),
        "(root)",
        "Additional property surprise is not allowed",
    ),
    (
        |d| d["prompts"]["chat"]["model"] = json!("x"),
        "prompts.chat",
        "Additional property model",
    ),
    (
        |d| d["prompts"]["chat"]["id"] = json!("Chat"),
        "prompts.chat.id",
        "^[a-z][a-z0-9_-]*$",
    ),
    (
        |d| d["prompts"]["chat"]["variables"][0]["name"] = json!("1x"),
        "prompts.chat.variables[0].name",
        "pattern",
    ),
    (
        |d| d["prompts"]["chat"]["variables"][0]["type"] = json!("integer"),
        "prompts.chat.variables[0].type",
        "must be one of the following",
    ),
    (
        |d| d["template_engine"] = json!({"version": "v1"}),
        "template_engine",
        "syntax is required",
    ),
    (
        |d| d["template_engine"]["features"] = json!(["sorcery"]),
        "template_engine.features[0]",
        "must be one of",
    ),
    (
        |d| d["tools"]["get_time"] = json!({"name": "get_time"}),
        "tools.get_time",
        "description is required",
    ),
    (
        |d| d["tools"]["get_time"]["parameters"]["type"] = json!("array"),
        "tools.get_time.parameters.type",
        "must be one of",
    ),
    (
        |d| d["prompts"]["chat"]["parameters"]["temperature"] = json!(3),
        "prompts.chat.parameters.temperature",
        "less than or equal to 2",
    ),
    (
        |d| d["prompts"]["chat"]["parameters"]["max_tokens"] = json!("many"),
        "prompts.chat.parameters.max_tokens",
        "Expected: integer, given: string",
    ),
    (
        |d| d["prompts"] = json!({}),
        "prompts",
        "at least 1 properties",
    ),
    (
        |d| d["metadata"]["language"] = json!("eng"),
        "metadata.language",
        "^[a-z]{2}$",
    ),
    (
        |d| d["compilation"]["created_at"] = json!("yesterday"),
        "compilation.created_at",
        "format 'date-time'",
    ),
    (
        |d| d["prompts"]["chat"]["validators"][0] = json!({"enabled": true}),
        "prompts.chat.validators[0]",
        "type is required",
    ),
    (
        |d| d["prompts"]["chat"]["tool_policy"]["tool_choice"] = json!("always"),
        "prompts.chat.tool_policy.tool_choice",
        "must be one of",
    ),
];

/// Each of agentwire's rules, broken alone.
const RULE_CASES: &[(Edit, &str, &str)] = &[
    (
        |d| d["prompts"]["chat"]["tools"] = json!(["get_weather"]),
        "prompts.chat.tools[0]",
        "no tool \"get_weather\"",
    ),
    (
        |d| d["prompts"]["chat"]["system_template"] = json!("Hi {{mood}}"),
        "prompts.chat.system_template",
        "neither a declared variable",
    ),
    (
        |d| d["prompts"]["chat"]["system_template"] = json!("Hi {{#if x}}"),
        "prompts.chat.system_template",
        "only `{{name}}`",
    ),
    (
        |d| d["prompts"]["chat"]["validators"][0]["type"] = json!("banned_words"),
        "prompts.chat.validators[0]",
        "not supported",
    ),
    (
        |d| d["prompts"]["chat"]["validators"][0]["params"] = json!({"max_tokens": 9}),
        "prompts.chat.validators[0].params.max_characters",
        "needs max_characters",
    ),
    (
        |d| d["prompts"]["chat"]["tool_policy"]["tool_choice"] = json!("required"),
        "prompts.chat.tool_policy.tool_choice",
        "only \"auto\"",
    ),
    (
        |d| d["prompts"]["chat"]["tool_policy"]["max_tool_calls_per_turn"] = json!(2),
        "prompts.chat.tool_policy.max_tool_calls_per_turn",
        "not supported",
    ),
    (
        |d| d["prompts"]["chat"]["evals"] = json!([{"id": "x"}]),
        "prompts.chat.evals",
        "not supported",
    ),
    (
        |d| d["prompts"]["chat"]["model_overrides"] = json!({"gpt-4": {}}),
        "prompts.chat.model_overrides",
        "not supported",
    ),
    (
        |d| d["prompts"]["chat"]["media"] = json!({"enabled": true}),
        "prompts.chat.media",
        "not supported",
    ),
    (
        |d| d["prompts"]["chat"]["pipeline"] = json!({"stages": ["provider", "template"]}),
        "prompts.chat.pipeline.stages[1]",
        "not a stage",
    ),
    (
        |d| d["prompts"]["chat"]["variables"][0]["default"] = json!(7),
        "prompts.chat.variables[0].default",
        "not a string",
    ),
    (
        |d| d["prompts"]["chat"]["variables"][0]["binding"] = json!({"kind": "env"}),
        "prompts.chat.variables[0].binding",
        "not supported",
    ),
    (
        |d| d["workflow"] = json!({"entry": "chat"}),
        "workflow",
        "not supported",
    ),
    (
        |d| d["evals"] = json!([{"id": "x"}]),
        "evals",
        "not supported",
    ),
    (
        |d| d["skills"] = json!(["./skills"]),
        "skills",
        "not supported",
    ),
    (
        |d| d["agents"] = json!({"entry": "chat"}),
        "agents",
        "not supported",
    ),
    (
        |d| d["compositions"] = json!({"c": {}}),
        "compositions",
        "not supported",
    ),
    (
        |d| d["template_engine"]["syntax"] = json!("${variable}"),
        "template_engine.syntax",
        "{{variable}} syntax only",
    ),
    (
        |d| d["template_engine"]["features"] = json!(["loops"]),
        "template_engine.features[0]",
        "loops is not supported",
    ),
    (
        |d| d["tools"]["get_time"]["name"] = json!("clock"),
        "tools.get_time.name",
        "must equal its key",
    ),
];

/// Asserts that each case's edit of `useful()` fails at its path.
fn assert_cases(cases: &[(Edit, &str, &str)]) -> Vec<CompileError> {
    cases
        .iter()
        .map(|(edit, path, message)| {
            let error = refused(edit);
            let found = error.diagnostics.iter().find(|d| d.path == *path);
            assert!(
                found.is_some_and(|d| d.message.contains(message)),
                "{path}: {message}: {:#?}",
                error.diagnostics
            );
            error
        })
        .collect()
}

#[test]
fn each_schema_rule_fails_at_its_path() {
    for error in assert_cases(SCHEMA_CASES) {
        assert!(
            error.error.starts_with("pack failed schema validation: ["),
            "{}",
            error.error
        );
    }
}

#[test]
fn each_agentwire_rule_fails_at_its_path() {
    assert_cases(RULE_CASES);
}

#[test]
fn a_template_with_undeclared_variables_and_none_declared_is_worded_as_packc() {
    let mut document = minimum();
    document["prompts"]["chat"]["system_template"] = json!("Hello {{name}}");
    let error = compile_json(&document).unwrap_err();
    assert_eq!(
        error.error,
        "prompt 'chat': system_template references variables, but none are declared"
    );
    assert_eq!(error.diagnostics[0].path, "prompts.chat.system_template");
    assert_eq!(
        error.warnings.len(),
        1,
        "the compilation warning: {:?}",
        error.warnings
    );
}

#[test]
fn warnings_name_what_is_ignored_and_what_is_unused() {
    let mut document = useful();
    let chat = &mut document["prompts"]["chat"];
    chat["variables"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "unused", "type": "string", "required": false}));
    chat["validators"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "banned_words", "enabled": false}));
    chat["pipeline"] = json!({"stages": ["template", "provider", "validator"],
        "middleware": [{"type": "provider", "config": {"timeout_ms": 1}}]});
    let compiled = compile_json(&document).unwrap();
    assert_eq!(
        compiled.warnings,
        [
            "prompts.chat.variables[1]: \"unused\" is declared but the template never uses it",
            "prompts.chat.validators[1]: banned_words is disabled; ignored",
            "prompts.chat.pipeline.middleware: ignored: agentwire's own retries, timeouts and template rules apply",
        ]
    );
}

#[test]
fn no_message_quotes_the_template() {
    let mut document = minimum();
    document["prompts"]["chat"]["system_template"] = json!("SECRET-PERSONA {{ bad syntax }}");
    let error = compile_json(&document).unwrap_err();
    assert!(!error.error.contains("SECRET"), "{}", error.error);
    assert!(
        error
            .diagnostics
            .iter()
            .all(|d| !d.message.contains("SECRET"))
    );
}

#[test]
fn yaml_errors_carry_their_line_and_column() {
    let yaml = "id: hello\nname: Hello\nversion: 1.0.0\ntemplate_engine:\n  version: v1\n  syntax: \"{{variable}}\"\nprompts:\n  chat:\n    id: chat\n    name: Chat\n    version: one\n    system_template: Hi.\n";
    let error = compile(yaml, "hello.yaml").unwrap_err();
    assert_eq!(
        error.diagnostics,
        [Diagnostic {
            path: "prompts.chat.version".to_owned(),
            line: Some(11),
            column: Some(5),
            message: "Does not match pattern 'SemVer 2.0.0 (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], optional v prefix)'".to_owned(),
        }]
    );
    assert_eq!(
        error.error,
        "pack failed schema validation: [prompts.chat.version: Does not match pattern 'SemVer 2.0.0 (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], optional v prefix)' (value: one)]"
    );
    // An unknown key is placed at the key.
    let yaml = yaml.replace(
        "    system_template: Hi.\n",
        "    system_template: Hi.\n    colour: red\n",
    );
    let error = compile(&yaml, "hello.yaml").unwrap_err();
    let unknown = error
        .diagnostics
        .iter()
        .find(|d| d.message.contains("colour"))
        .unwrap();
    assert_eq!(
        (unknown.path.as_str(), unknown.line, unknown.column),
        ("prompts.chat", Some(13), Some(5))
    );
}

#[test]
fn syntax_errors_carry_the_parsers_position() {
    let error = compile("{\n  \"id\": \"x\",\n  oops\n}", "pack.json").unwrap_err();
    let diagnostic = &error.diagnostics[0];
    assert_eq!((diagnostic.line, diagnostic.column), (Some(3), Some(3)));
    assert!(
        error
            .error
            .starts_with("failed to parse pack.json: invalid JSON: "),
        "{}",
        error.error
    );
    let error = compile("id: [unclosed\nname: x\n", "pack.yaml").unwrap_err();
    assert!(error.diagnostics[0].line.is_some(), "{error:?}");
    assert!(
        error
            .error
            .starts_with("failed to parse pack.yaml: invalid YAML: "),
        "{}",
        error.error
    );
    assert!(!error.error.contains('\n'), "one line: {}", error.error);
    let error = compile("id: x\n  bad: indent\n", "pack.yaml").unwrap_err();
    assert_eq!(
        error.error,
        "failed to parse pack.yaml: invalid YAML: mapping values are not allowed in this context at line 2 column 6"
    );
}

#[test]
fn variables_give_a_schema_for_their_values() {
    let variable: Variable = serde_json::from_value(json!({
        "name": "tier", "type": "string", "required": true,
        "validation": {"pattern": "^(free|pro)$", "max_length": 4}
    }))
    .unwrap();
    assert_eq!(
        variable.value_schema(),
        json!({"type": "string", "pattern": "^(free|pro)$", "maxLength": 4})
    );
    assert_eq!(VariableType::Number.from_text(" 4.5 "), Some(json!(4.5)));
    assert_eq!(VariableType::Number.from_text("four"), None);
    assert_eq!(VariableType::Boolean.from_text("true"), Some(json!(true)));
    assert_eq!(VariableType::String.from_text("4"), Some(json!("4")));
}
