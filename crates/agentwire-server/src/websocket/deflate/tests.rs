use super::*;

fn answer(offers: &[&str], settings: &Compression) -> Option<String> {
    let headers: Vec<HeaderValue> = offers
        .iter()
        .map(|offer| HeaderValue::from_str(offer).unwrap())
        .collect();
    negotiate(&headers, settings)
        .map(|agreement| agreement.response_header().to_str().unwrap().to_owned())
}

/// The defaults with the full 32 KiB window, which needs no announcing.
fn wide() -> Compression {
    Compression {
        max_window_bits: MAX_WINDOW_BITS,
        ..Compression::default()
    }
}

fn wide_answer(offer: &str) -> Option<String> {
    answer(&[offer], &wide())
}

#[test]
fn the_default_window_is_announced() {
    assert_eq!(
        answer(&["permessage-deflate"], &Compression::default()).as_deref(),
        Some("permessage-deflate; server_max_window_bits=12")
    );
}

#[test]
fn a_bare_offer_is_accepted_with_a_bare_answer() {
    assert_eq!(
        wide_answer("permessage-deflate").as_deref(),
        Some("permessage-deflate")
    );
}

#[test]
fn what_browsers_offer_is_accepted() {
    // Chrome and Firefox: the client can be told a window; nothing to tell.
    assert_eq!(
        wide_answer("permessage-deflate; client_max_window_bits").as_deref(),
        Some("permessage-deflate")
    );
}

#[test]
fn no_context_takeover_asked_for_is_answered() {
    assert_eq!(
        wide_answer("permessage-deflate; server_no_context_takeover").as_deref(),
        Some("permessage-deflate; server_no_context_takeover")
    );
    assert_eq!(
        wide_answer("permessage-deflate; client_no_context_takeover; client_max_window_bits")
            .as_deref(),
        Some("permessage-deflate; client_no_context_takeover")
    );
}

#[test]
fn the_servers_window_is_the_smaller_of_the_offer_and_the_setting() {
    assert_eq!(
        wide_answer("permessage-deflate; server_max_window_bits=10").as_deref(),
        Some("permessage-deflate; server_max_window_bits=10")
    );
    let twelve = Compression {
        max_window_bits: 12,
        ..Compression::default()
    };
    assert_eq!(
        answer(&["permessage-deflate; server_max_window_bits=14"], &twelve).as_deref(),
        Some("permessage-deflate; server_max_window_bits=12")
    );
    // Not offered: announced all the same when under 15 (§7.1.2.1).
    assert_eq!(
        answer(&["permessage-deflate"], &twelve).as_deref(),
        Some("permessage-deflate; server_max_window_bits=12")
    );
    // Offered at 15: the answer must carry it.
    assert_eq!(
        wide_answer("permessage-deflate; server_max_window_bits=15").as_deref(),
        Some("permessage-deflate; server_max_window_bits=15")
    );
}

#[test]
fn a_quoted_value_is_read_like_a_token() {
    assert_eq!(
        wide_answer(r#"permessage-deflate; server_max_window_bits="11""#).as_deref(),
        Some("permessage-deflate; server_max_window_bits=11")
    );
}

#[test]
fn a_window_of_eight_bits_is_declined_for_the_next_offer() {
    assert_eq!(
        wide_answer("permessage-deflate; server_max_window_bits=8"),
        None
    );
    assert_eq!(
        wide_answer(
            "permessage-deflate; server_max_window_bits=8, permessage-deflate; server_no_context_takeover"
        )
        .as_deref(),
        Some("permessage-deflate; server_no_context_takeover")
    );
}

#[test]
fn offers_the_rfc_says_to_decline_are_declined() {
    for offer in [
        "permessage-deflate; unknown_parameter",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=010",
        "permessage-deflate; server_max_window_bits=ten",
        "permessage-deflate; client_max_window_bits=16",
        "permessage-deflate; server_no_context_takeover=1",
        r#"permessage-deflate; server_max_window_bits="10"#,
        "x-webkit-deflate-frame",
        "",
    ] {
        assert_eq!(wide_answer(offer), None, "{offer}");
    }
}

#[test]
fn the_first_acceptable_offer_wins_across_headers() {
    assert_eq!(
        answer(
            &[
                "x-webkit-deflate-frame, permessage-deflate; bogus",
                "permessage-deflate; client_no_context_takeover, permessage-deflate",
            ],
            &wide()
        )
        .as_deref(),
        Some("permessage-deflate; client_no_context_takeover")
    );
}

#[test]
fn without_context_takeover_both_directions_reset() {
    let reset = Compression {
        context_takeover: Takeover::Reset,
        ..wide()
    };
    assert_eq!(
        answer(&["permessage-deflate; client_max_window_bits"], &reset).as_deref(),
        Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover")
    );
}

#[test]
fn compression_off_declines_everything() {
    let off = Compression {
        enabled: false,
        ..wide()
    };
    assert_eq!(answer(&["permessage-deflate"], &off), None);
}

#[test]
fn the_agreement_says_what_each_side_keeps() {
    let headers = [HeaderValue::from_static(
        "permessage-deflate; client_no_context_takeover; server_max_window_bits=9",
    )];
    let agreement = negotiate(&headers, &Compression::default()).unwrap();
    assert_eq!(agreement.server_window_bits, 9);
    assert_eq!(agreement.server_takeover, Takeover::Keep);
    assert_eq!(agreement.client_takeover, Takeover::Reset);
}
