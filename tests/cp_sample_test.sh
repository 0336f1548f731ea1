#!/bin/sh
# uring-cp end to end: a tree of files of many sizes (empty, under, at and over the buffer size, several
# MiB of random bytes), nested directories, a relative symbolic link and unusual modes is copied exactly
# (diff -r, and the modes and link targets compared); a single file too; DEST that exists, a FIFO in the
# tree and bad options are refused with the right exit status and a message naming the path.
set -eu
cp_bin=$1
backend=$2
work=$(mktemp -d /tmp/uring_cp_test.XXXXXX)
trap 'chmod -R u+rwx "$work" 2>/dev/null; rm -rf "$work"' EXIT INT TERM

src=$work/src
mkdir -p "$src/a/b/c" "$src/empty_dir"
: > "$src/empty"
printf x > "$src/one"
head -c 65535 /dev/urandom > "$src/a/under"
head -c 65536 /dev/urandom > "$src/a/exact"
head -c 65537 /dev/urandom > "$src/a/b/over"
head -c 5242883 /dev/urandom > "$src/a/b/c/big"
for i in $(seq 1 40); do head -c $((i * 997)) /dev/urandom > "$src/a/many_$i"; done
ln -s ../one "$src/a/link_to_one"
ln -s /nonexistent/target "$src/dangling"
chmod 0640 "$src/one"
chmod 0755 "$src/a/b/over"
chmod 0750 "$src/a/b"

listing() {  # mode, type and link target of everything under $1, by relative path
  (cd "$1" && find . -printf '%p %m %y %l\n' | sort)
}

"$cp_bin" --backend "$backend" --jobs 3 --buffer-size 65536 --sync --progress "$src" "$work/dst" 2> "$work/err"
diff -r --no-dereference "$src" "$work/dst"
[ "$(listing "$src")" = "$(listing "$work/dst")" ] || { echo "modes or links differ"; exit 1; }
grep -q "uring-cp: 6257032 of 6257032 bytes, 46 of 46 files" "$work/err" || { cat "$work/err"; exit 1; }

# Defaults, no progress: the same tree again.
"$cp_bin" --backend "$backend" "$src" "$work/dst2"
diff -r --no-dereference "$src" "$work/dst2"

# One file.
"$cp_bin" --backend "$backend" --sync "$src/a/b/c/big" "$work/big_copy"
cmp "$src/a/b/c/big" "$work/big_copy"

# Refusals: DEST exists (1), a FIFO in the tree (1, nothing half-copied is claimed), bad options (2).
set +e
"$cp_bin" --backend "$backend" "$src" "$work/dst" 2> "$work/err"; status=$?
[ $status -eq 1 ] && grep -q "dst: exists" "$work/err" || { echo "existing DEST: $status"; cat "$work/err"; exit 1; }
mkfifo "$src/a/fifo"
"$cp_bin" --backend "$backend" "$src" "$work/dst3" 2> "$work/err"; status=$?
[ $status -eq 1 ] && grep -q "fifo: not a file, directory or link" "$work/err" || { echo "fifo: $status"; cat "$work/err"; exit 1; }
"$cp_bin" --jobs 0 "$src" "$work/dst4" 2> "$work/err"; status=$?
[ $status -eq 2 ] && grep -q -- "--jobs takes 1..256" "$work/err" || { echo "--jobs 0: $status"; exit 1; }
"$cp_bin" "$src" 2> "$work/err"; status=$?
[ $status -eq 2 ] || { echo "one path: $status"; exit 1; }
rm "$src/a/fifo"
# A failed call: the message names the call and the path.
"$cp_bin" --backend "$backend" "$src" "$work/no/such/dir" 2> "$work/err"; status=$?
[ $status -eq 1 ] && grep -q "mkdir $work/no/such/dir: No such file or directory" "$work/err" || { echo "mkdir: $status"; cat "$work/err"; exit 1; }
# An unreadable file: the message names it and the call.
chmod 0000 "$src/one"
if [ "$(id -u)" != 0 ]; then
  "$cp_bin" --backend "$backend" "$src" "$work/dst5" 2> "$work/err"; status=$?
  [ $status -eq 1 ] && grep -q "open $src/one: Permission denied" "$work/err" || { echo "unreadable: $status"; cat "$work/err"; exit 1; }
fi
set -e
echo "uring-cp ($backend): copied and refused as expected"
