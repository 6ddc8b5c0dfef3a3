#!/usr/bin/env bash
# Materialize every labelled repository at its recorded commit.
#
# usage: bench/realcode/checkout.sh [MIRROR_DIR] [ROOT] [LABELS_DIR]
#   MIRROR_DIR  directory of git mirrors named owner+name (default /work/.mirror);
#               each mirror is either MIRROR_DIR/owner+name/repo (a bare git dir)
#               or MIRROR_DIR/owner+name itself
#   ROOT        where work trees go (default $OOMLINT_REALCODE or /work/realcode)
#   LABELS_DIR  default: the labels/ directory next to this script
#
# A tree that already exists in ROOT is left alone (delete it to refresh).
# Blobs missing from a snapshot (large files, LFS) are skipped, so a partial
# snapshot still yields every source file it holds.
set -u
# A failed `git archive` (a blob absent from the snapshot) must fail the pipe, not be
# hidden by tar reading a truncated stream and exiting 0.
set -o pipefail

here="$(cd "$(dirname "$0")" && pwd)"
mirror="${1:-/work/.mirror}"
root="${2:-${OOMLINT_REALCODE:-/work/realcode}}"
labels="${3:-$here/labels}"

mkdir -p "$root"
status=0
for f in "$labels"/*.tsv; do
    [ -e "$f" ] || continue
    key="$(basename "$f" .tsv)"
    commit="$(awk -F'\t' '$1 == "# commit" { print $2; exit }' "$f")"
    if [ -z "$commit" ]; then
        echo "skip $key: no '# commit' line in $(basename "$f")"
        continue
    fi
    gitdir=""
    for cand in "$mirror/$key/repo" "$mirror/$key/repo/.git" "$mirror/$key" "$mirror/$key/.git" "$mirror/$key.git"; do
        if [ -d "$cand" ] && git --git-dir="$cand" rev-parse --git-dir >/dev/null 2>&1; then
            gitdir="$cand"
            break
        fi
    done
    if [ -z "$gitdir" ]; then
        echo "skip $key: no mirror under $mirror"
        continue
    fi
    if ! git --git-dir="$gitdir" cat-file -e "$commit^{commit}" 2>/dev/null; then
        echo "skip $key: mirror lacks commit $commit"
        continue
    fi
    dest="$root/$key"
    if [ -d "$dest" ]; then
        echo "have $key (exists: $dest)"
        continue
    fi
    tmp="$dest.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    if git --git-dir="$gitdir" archive "$commit" 2>/dev/null | tar -x -C "$tmp" 2>/dev/null; then
        :
    else
        # Some blobs are absent from the snapshot: write the present ones one by one.
        rm -rf "$tmp"
        mkdir -p "$tmp"
        missing=0
        # NUL-separated: paths with non-ASCII bytes come out as they are, not quoted.
        while IFS=$'\t' read -r -d '' meta path; do
            set -- $meta
            mode="$1"; type="$2"; sha="$3"
            [ "$type" = "blob" ] || continue
            [ "$mode" = "120000" ] && continue
            if git --git-dir="$gitdir" cat-file -e "$sha" 2>/dev/null; then
                mkdir -p "$tmp/$(dirname "$path")"
                git --git-dir="$gitdir" cat-file blob "$sha" >"$tmp/$path"
            else
                missing=$((missing + 1))
            fi
        done < <(git --git-dir="$gitdir" ls-tree -r -z --full-tree "$commit")
        echo "note $key: $missing blob(s) absent from the snapshot, skipped"
    fi
    # -T: never into an existing tree (a second checkout.sh writing the same ROOT at the
    # same time): that one's tree stands, this copy is dropped.
    if ! mv -T "$tmp" "$dest" 2>/dev/null; then
        rm -rf "$tmp"
        echo "have $key (written meanwhile by another run)"
        continue
    fi
    echo "done $key @ $commit"
done
exit $status
