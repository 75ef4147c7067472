#!/usr/bin/env bash
# Regenerates the voice-call test fixtures in crates/agentwire/tests/fixtures/audio:
# raw PCM16LE mono, speech by espeak-ng, resampled and padded by sox
# (Debian packages espeak-ng and sox). The .pcm files are committed, so
# tests need neither tool; run this after changing what they say.
#
#   scripts/audio-fixtures.sh [--check]
#
# --check regenerates into a temporary directory and compares durations
# with the committed files (espeak-ng builds may differ by a few samples,
# never by much), failing when one drifts by more than 50 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
out=crates/agentwire/tests/fixtures/audio
check=false
if [[ "${1:-}" == "--check" ]]; then
  check=true
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"; [[ $check == true ]] && rm -rf "$out"' EXIT

# An utterance at 16 kHz with 800 ms of trailing silence, so a voice
# detector ends it.
speech() { # name rate text
  espeak-ng -v en -s 150 -w "$work/$1.wav" "$3"
  sox "$work/$1.wav" -r "$2" -c 1 -b 16 -e signed-integer -L -t raw "$out/$1.pcm" pad 0 0.8
}
speech weather-16k 16000 "what is the weather"
speech hello-16k 16000 "hello there"
speech weather-24k 24000 "what is the weather"
# 1 s of silence at 16 kHz.
sox -n -r 16000 -c 1 -b 16 -e signed-integer -L -t raw "$out/silence-16k.pcm" trim 0 1

if [[ $check == true ]]; then
  committed=crates/agentwire/tests/fixtures/audio
  for f in "$out"/*.pcm; do
    name=$(basename "$f")
    fresh=$(stat -c %s "$f")
    kept=$(stat -c %s "$committed/$name")
    rate=16000; [[ $name == *24k* ]] && rate=24000
    drift=$(( (fresh > kept ? fresh - kept : kept - fresh) * 1000 / (rate * 2) ))
    echo "$name: committed $kept bytes, regenerated $fresh bytes (${drift} ms apart)"
    (( drift <= 50 )) || { echo "$name drifted by ${drift} ms" >&2; exit 1; }
  done
fi
