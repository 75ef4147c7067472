#!/usr/bin/env bash
# Makes a throwaway CA and a server certificate it signs, for the TLS tests
# (PostgreSQL's in scripts/postgres.sh start --tls, Redis's in the e2e
# tests): in DIR, ca.pem (the CA), server.pem and server.key (mode 0600).
# The server certificate is for DNS name localhost only, so a client that
# connects to 127.0.0.1 sees a name mismatch. Valid for two days.
#
#   scripts/test-certs.sh DIR
set -euo pipefail
dir="${1:?usage: test-certs.sh DIR}"
if ! command -v openssl >/dev/null; then
    echo "test-certs.sh: installing openssl with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssl >&2 ||
        { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssl >&2; }
fi
mkdir -p "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=agentwire test CA" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$dir/server.key" -out "$dir/server.csr" >/dev/null 2>&1
printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >"$dir/ext.cnf"
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 2 -extfile "$dir/ext.cnf" -out "$dir/server.pem" >/dev/null 2>&1
chmod 0600 "$dir/server.key"
chmod 0644 "$dir/ca.pem" "$dir/server.pem"
