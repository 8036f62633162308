#!/usr/bin/env bash
# Builds the image from the Dockerfile with Buildah on this Debian machine, and starts it once:
# /healthz and one API call (docs/deploy.md, "Building the image here").
#
# Containers cannot be run on these machines (crun may not set RLIMIT_NPROC: no CAP_SYS_RESOURCE),
# so every step runs with Buildah's chroot isolation, which needs no runtime. No image registry is
# reached: the base is made here — Debian bookworm from Debian's archive (debootstrap --variant=minbase)
# plus this machine's Node 20 (binary, headers, npm) — and tagged
# localhost/callplane-base:node20-bookworm-simulated. It is SIMULATED: a stand-in for the official
# node:20-bookworm-slim, with the same Debian release and Node major, not that image itself.
#
#   bash scripts/build-image.sh            # base (once, cached), image, smoke start
#   SKIP_SMOKE=1 bash scripts/build-image.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=localhost/callplane-base:node20-bookworm-simulated
IMAGE=${IMAGE:-localhost/callplane:dev}
WORK=${WORK:-/var/tmp/callplane-image}
have() { command -v "$1" >/dev/null 2>&1; }

if ! have buildah || ! have podman || ! have debootstrap; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah podman debootstrap fuse-overlayfs >/dev/null
fi
mkdir -p "$WORK"

# The base: made once per machine (buildah keeps it).
if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  node_major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$node_major" = 20 ] || { echo "build-image: this machine's Node is $node_major, the image's is 20" >&2; exit 1; }
  rootfs="$WORK/rootfs"
  rm -rf "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
  prefix=$(dirname "$(dirname "$(command -v node)")")
  install -D "$(command -v node)" "$rootfs/usr/bin/node"
  mkdir -p "$rootfs/usr/include" "$rootfs/usr/lib/node_modules"
  cp -a "$prefix/include/node" "$rootfs/usr/include/"
  cp -a "$(npm root -g)/npm" "$rootfs/usr/lib/node_modules/"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/bin/npx"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  # A site whose traffic goes through its own TLS proxy gives its base image its CA (npm ci in the
  # build would fail otherwise); this machine's, when Node is told of one.
  change=()
  if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
    install -D -m 0644 "$NODE_EXTRA_CA_CERTS" "$rootfs/usr/local/share/ca-certificates/site-extra-ca.crt"
    change=(--change "ENV NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/site-extra-ca.crt")
  fi
  # buildah has no import; podman's writes to the same storage.
  tar -C "$rootfs" -c . | podman import "${change[@]}" - "$BASE" >/dev/null
  rm -rf "$rootfs"
fi

start=$(date +%s)
buildah bud --isolation chroot --layers --format docker --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" \
  --build-arg "NODE_IMAGE=$BASE" -t "$IMAGE" -f Dockerfile . >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log" >&2; exit 1; }
echo "build-image: $IMAGE built in $(( $(date +%s) - start )) s; size $(buildah images --format '{{.Size}}' "$IMAGE" | head -1)"

[ "${SKIP_SMOKE:-}" = 1 ] && exit 0

# Started once: `serve --role all` on SQLite in a throw-away data dir, as the image's user.
ctr=$(buildah from "$IMAGE")
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
token="cp_smoke_$(node -p 'require("crypto").randomBytes(12).toString("hex")')"
buildah run --isolation chroot --user callplane \
  --env "PORT=$port" --env HOST=127.0.0.1 --env DATA_DIR=/tmp/callplane --env CALLPLANE_SIP_ENABLED=false \
  --env "CALLPLANE_ADMIN_TOKEN=$token" "$ctr" -- \
  /usr/bin/tini -- node /app/dist/main.js serve --role all >"$WORK/smoke.log" 2>&1 &
pid=$!
ok=
for _ in $(seq 1 60); do
  if node -e "fetch('http://127.0.0.1:$port/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"; then ok=1; break; fi
  sleep 1
done
[ -n "$ok" ] || { kill "$pid" 2>/dev/null; tail -30 "$WORK/smoke.log" >&2; echo "build-image: /healthz never answered" >&2; exit 1; }
account=$(node -e "fetch('http://127.0.0.1:$port/api/v2/account',{headers:{authorization:'Bearer $token'}}).then(async r=>{console.log(r.status, (await r.text()).slice(0,120))})")
console=$(node -e "fetch('http://127.0.0.1:$port/console/').then(r=>console.log(r.status))")
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
echo "build-image: started once: /healthz 200; GET /api/v2/account: $account; GET /console/: $console"
case "$account" in 200*) ;; *) exit 1 ;; esac
[ "$console" = 200 ] || exit 1
