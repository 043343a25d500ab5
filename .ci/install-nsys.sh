#!/usr/bin/env bash
# Installs the Nsight Systems 2023.4 CLI (nsys) from Debian's non-free packages into a prefix,
# without the GUI's dependencies, and prints the path of a wrapper that runs it.
#
#   NSYS=$(bash .ci/install-nsys.sh [PREFIX])      # PREFIX defaults to /opt/nsys-2023.4
#   "$NSYS" profile -t osrt -s none --cpuctxsw=none -o out -f true python3 prog.py
#   "$NSYS" export --type sqlite -o out.sqlite out.nsys-rep
#
# Debian 12 (bookworm) only has nsight-systems 2022.4; 2023.4.4.54 is in Debian 13 (trixie)
# non-free. The two .debs are fetched with apt-get download through a private apt config for
# that suite (the system's sources are not pointed at trixie), then unpacked with dpkg -x.
# Only libssh-4 is installed from the system's own suite (the importer links libssh.so).
#
# Idempotent: exits at once when the wrapper is there and works. Needs root (apt).
# stdout: only the wrapper's path. stderr: one status line, or the failing step's output.
# Environment: NSYS_DEB_SUITE (default trixie), NSYS_DEB_MIRROR (default: the URI the
# system's sources use for its Debian suite), NSYS_WANT_VERSION (default 2023.4).
set -euo pipefail

PREFIX=$(realpath -m "${1:-/opt/nsys-2023.4}")
WRAPPER=$PREFIX/bin/nsys
MARKER=$PREFIX/.installed-by-install-nsys
SUITE=${NSYS_DEB_SUITE:-trixie}
WANT=${NSYS_WANT_VERSION:-2023.4}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
export DEBIAN_FRONTEND=noninteractive

die() { echo "install-nsys: $*" >&2; exit 1; }
# run a command silently; show its output only if it fails
quiet() {
    local log rc=0
    log=$(mktemp)
    "$@" >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "install-nsys: failed ($rc): $*" >&2
        tail -n 30 "$log" >&2
    fi
    rm -f "$log"
    return "$rc"
}

# The install works when: the wrapper prints the wanted version, and the importer that turns
# the capture into a .nsys-rep resolves all its libraries (libssh.so among them).
works() {
    local out imp real
    [ -x "$WRAPPER" ] && [ -f "$MARKER" ] || return 1
    out=$("$WRAPPER" --version 2>/dev/null) || return 1
    case $out in *"version $WANT."*) ;; *) return 1 ;; esac
    imp=$(sed -n 's/^IMPORTER=//p' "$MARKER")
    real=$(sed -n 's/^NSYS=//p' "$MARKER")
    [ -n "$imp" ] && [ -x "$imp" ] && [ -x "${real%/*}/../host-linux-x64/QdstrmImporter" ] || return 1
    out=$(ldd "$imp" 2>&1) || return 1
    case $out in *"not found"*) return 1 ;; esac
}

if works; then
    echo "$WRAPPER"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (uses apt-get)"
if [ -e "$PREFIX" ] && [ ! -f "$MARKER" ] && [ -n "$(ls -A "$PREFIX" 2>/dev/null)" ]; then
    die "$PREFIX exists and was not made by this script; refusing to replace it"
fi

. /etc/os-release
CODENAME=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}

# --- 1. contrib and non-free in the system's Debian sources (deb822 or one-line format) ---
add_components() { # FILE: add contrib/non-free to each Components line / deb line listing main
    local f=$1 tmp
    tmp=$(mktemp)
    awk '
    function fix(line,   n, i, w, has_c, has_nf) {
        n = split(line, w, /[ \t]+/); has_c = has_nf = 0
        for (i = 1; i <= n; i++) { if (w[i] == "contrib") has_c = 1; if (w[i] == "non-free") has_nf = 1 }
        if (!has_c) line = line " contrib"
        if (!has_nf) line = line " non-free"
        return line
    }
    /^Components:/ && $0 ~ /[ \t]main([ \t]|$)/ { print fix($0); next }
    /^deb(-src)?[ \t]/ && $0 ~ /[ \t]main([ \t]|$)/ { print fix($0); next }
    { print }' "$f" >"$tmp"
    if cmp -s "$f" "$tmp"; then rm -f "$tmp"; else cat "$tmp" >"$f"; rm -f "$tmp"; fi
}
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    [ -f "$f" ] && add_components "$f"
done
quiet apt-get update -q

# --- 2. libssh-4 from the system's suite ---
if ! dpkg-query -W -f='${Status}' libssh-4 2>/dev/null | grep -q 'install ok installed'; then
    quiet apt-get install -y -q --no-install-recommends libssh-4
fi
SYS_LIBSSH=$(dpkg -L libssh-4 | grep -m1 '/libssh\.so\.4$') || die "libssh.so.4 not found in libssh-4"

# --- 3. download the .debs through a private apt config for $SUITE ---
mirror() { # the URI the system's sources use for $CODENAME (not -security/-updates)
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v s="$CODENAME" '
            BEGIN { RS = ""; FS = "\n" }
            {
                uri = ""; ok = 0
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/)   { split($i, u, /[ \t]+/); uri = u[2] }
                    if ($i ~ /^Suites:/) { n = split($i, w, /[ \t]+/); for (j = 2; j <= n; j++) if (w[j] == s) ok = 1 }
                    if ($i ~ /^Enabled:[ \t]*no/) ok = 0
                }
                if (ok && uri != "") { print uri; exit }
            }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        sed -nE "s/^deb[ \t]+(\[[^]]*\][ \t]+)?([^ \t]+)[ \t]+$CODENAME[ \t].*/\2/p" "$f"
    done
    return 0
}
MIRROR=${NSYS_DEB_MIRROR:-$(mirror | sed -n 1p)}
[ -n "$MIRROR" ] || die "no Debian '$CODENAME' source found in /etc/apt; set NSYS_DEB_MIRROR"

WORK=$(mktemp -d /tmp/install-nsys.XXXXXX)
STAGE=$PREFIX.partial
trap 'rm -rf "$WORK" "$STAGE"' EXIT
mkdir -p "$WORK/lists/partial" "$WORK/cache/archives/partial" "$WORK/parts" "$WORK/debs"
signed=""
[ -f "$KEYRING" ] && signed="[signed-by=$KEYRING] "
echo "deb $signed$MIRROR $SUITE non-free" >"$WORK/sources.list"
APT=(-o "Dir::Etc::sourcelist=$WORK/sources.list" -o "Dir::Etc::sourceparts=$WORK/parts"
     -o "Dir::State::Lists=$WORK/lists" -o "Dir::Cache=$WORK/cache"
     -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root")
quiet apt-get "${APT[@]}" update -q
(cd "$WORK/debs" && quiet apt-get "${APT[@]}" download -q nsight-systems nsight-systems-target)
for p in nsight-systems nsight-systems-target; do
    debs=("$WORK/debs/${p}_"*.deb)
    [ -f "${debs[0]}" ] || die "apt-get download $p gave no .deb"
    VERSION=$(dpkg-deb -f "${debs[0]}" Version)
    case $VERSION in "$WANT".*) ;; *) die "$SUITE has $p $VERSION, not $WANT (set NSYS_DEB_SUITE)" ;; esac
done

# --- 4. unpack into a staging folder, fix it up, then move it into place ---
rm -rf "$STAGE"
mkdir -p "$STAGE"
for deb in "$WORK"/debs/*.deb; do dpkg -x "$deb" "$STAGE"; done
rm -rf "$WORK/debs"

# The CLI: the ELF file named nsys in target-linux-x64 (usr/bin/nsys is a chain of symlinks).
REAL=$(find "$STAGE" -type f -path '*/target-linux-x64/nsys' | sed -n 1p)
IMP=$(find "$STAGE" -type f -path '*/host-linux-x64/QdstrmImporter' | sed -n 1p)
[ -n "$REAL" ] && [ -n "$IMP" ] || die "nsys or QdstrmImporter not found in the packages"
T=$(dirname "$REAL")   # .../usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64
H=$(dirname "$IMP")    # .../usr/lib/nsight-systems/host-linux-x64
# nsys looks for its host tools (QdstrmImporter, exporter, reports) in ../host-linux-x64 next
# to its own real path; Debian ships the host folder elsewhere.
if [ ! -e "$(dirname "$T")/host-linux-x64" ]; then
    ln -s "$(realpath --relative-to="$(dirname "$T")" "$H")" "$(dirname "$T")/host-linux-x64"
fi
# The host binaries have RPATH $ORIGIN and link libssh.so: put it in the host folder, pointing
# at the system's libssh.so.4 (Debian's own link is relative to /usr/lib and dangles here).
ln -sfn "$SYS_LIBSSH" "$H/libssh.so.4"
ln -sfn libssh.so.4 "$H/libssh.so"
# nsys stats imports nsysstats from host-linux-x64/python/lib; Debian puts it in target's
# python/lib (and in /usr/lib/python3/dist-packages, not unpacked here).
if [ -d "$T/python/lib" ]; then
    mkdir -p "$H/python/lib"
    for py in "$T"/python/lib/*.py; do
        [ -e "$H/python/lib/${py##*/}" ] || ln -s "$(realpath --relative-to="$H/python/lib" "$py")" "$H/python/lib/${py##*/}"
    done
fi
missing=$(ldd "$IMP" | grep 'not found' || true)
[ -z "$missing" ] || die "QdstrmImporter still misses libraries: $missing"

rel_real=${REAL#"$STAGE"/}
rel_imp=${IMP#"$STAGE"/}
mkdir -p "$STAGE/bin"
# No LD_LIBRARY_PATH here: it would leak into the profiled program; the binaries find their
# libraries through RPATH $ORIGIN.
cat >"$STAGE/bin/nsys" <<EOF
#!/bin/sh
# Nsight Systems CLI $WANT from Debian's packages, unpacked by .ci/install-nsys.sh
exec "$PREFIX/$rel_real" "\$@"
EOF
chmod 755 "$STAGE/bin/nsys"
printf 'VERSION=%s\nSUITE=%s\nNSYS=%s\nIMPORTER=%s\n' "$VERSION" "$SUITE" "$PREFIX/$rel_real" "$PREFIX/$rel_imp" >"$STAGE/${MARKER##*/}"

rm -rf "$PREFIX"
mkdir -p "$(dirname "$PREFIX")"
mv "$STAGE" "$PREFIX"

works || die "installed, but $WRAPPER does not work"
echo "install-nsys: $("$WRAPPER" --version) in $PREFIX" >&2
echo "$WRAPPER"
