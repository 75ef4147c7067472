use serde_json::json;

use super::*;

fn refusal(value: Value) -> (String, String, &'static str) {
    let refusal = Declaration::parse(&value).expect_err("refused");
    (refusal.kind, refusal.handle, refusal.reason.as_str())
}

#[test]
fn a_project_mount_parses_by_handle() {
    let declaration = Declaration::parse(&json!({"sandboxes": {
        "workspace/left": {"mounts": [{"role": "project", "id": "p-1"}]},
        "workspace": {},
    }}))
    .unwrap();
    let left = &declaration.sandboxes["workspace/left"];
    assert_eq!(left.sandbox, "workspace");
    assert_eq!(left.instance.as_deref(), Some("left"));
    assert_eq!(
        left.mounts,
        [Mount {
            role: "project".into(),
            id: "p-1".into()
        }]
    );
    let default = &declaration.sandboxes["workspace"];
    assert_eq!(
        (default.instance.as_deref(), default.mounts.len()),
        (None, 0)
    );
}

#[test]
fn nothing_declared_is_empty() {
    assert!(Declaration::parse(&json!({})).unwrap().is_empty());
    assert!(
        Declaration::parse(&json!({"sandboxes": {}}))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn the_checks_come_in_the_contracts_order() {
    assert_eq!(
        refusal(json!([1])),
        ("".into(), "".into(), "InvalidDeclaration")
    );
    assert_eq!(
        refusal(json!("x")),
        ("".into(), "".into(), "InvalidDeclaration")
    );
    // An unknown type is named even beside a bad sandboxes value.
    assert_eq!(
        refusal(json!({"sandboxes": 1, "volumes": {}})),
        ("volumes".into(), "".into(), "UnknownDeclarationType")
    );
    assert_eq!(
        refusal(json!({"sandboxes": []})),
        ("sandboxes".into(), "".into(), "InvalidSandboxDeclaration")
    );
}

#[test]
fn bad_handles_and_mounts_name_the_handle() {
    let bad = [
        ("a/b/c", json!({})),
        ("", json!({})),
        ("a/", json!({})),
        ("sp ace", json!({})),
        ("ok", json!([])),
        ("ok", json!({"mounts": {}})),
        ("ok", json!({"mounts": [], "image": "x"})),
        ("ok", json!({"mounts": [{"role": "project"}]})),
        ("ok", json!({"mounts": [{"role": "project", "id": 7}]})),
        (
            "ok",
            json!({"mounts": [{"role": "project", "id": "p", "mode": "ro"}]}),
        ),
        ("ok", json!({"mounts": [{"role": "project", "id": ".."}]})),
        ("ok", json!({"mounts": [{"role": "project", "id": "a/b"}]})),
        ("ok", json!({"mounts": [{"role": "project", "id": ""}]})),
        (
            "ok",
            json!({"mounts": [{"role": "p", "id": "x"}, {"role": "p", "id": "x"}]}),
        ),
    ];
    for (handle, body) in bad {
        let value = json!({"sandboxes": {handle: body}});
        assert_eq!(
            refusal(value.clone()),
            (
                "sandboxes".into(),
                handle.into(),
                "InvalidSandboxDeclaration"
            ),
            "{value}"
        );
    }
    let many: Vec<Value> = (0..=MAX_MOUNTS)
        .map(|i| json!({"role": "project", "id": format!("p{i}")}))
        .collect();
    assert_eq!(
        refusal(json!({"sandboxes": {"ok": {"mounts": many}}})).2,
        "InvalidSandboxDeclaration"
    );
}

#[test]
fn declarations_compare_by_content_not_key_order() {
    let a = Declaration::parse(&json!({"sandboxes": {"x": {}, "y": {}}})).unwrap();
    let b = Declaration::parse(&json!({"sandboxes": {"y": {}, "x": {}}})).unwrap();
    assert_eq!(a, b);
}
