#!/bin/sh
# gen-man.sh BINARY NAME VERSION OUT.gz: a man page for NAME generated from the binary's own
# --help and each subcommand's (so it never drifts from the CLI), gzipped reproducibly.
set -eu
bin=$1 name=$2 version=$3 out=$4
export ASAN_OPTIONS=detect_leaks=0
esc() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }
help=$("$bin" --help)
summary=$(printf '%s\n' "$help" | head -n 1 | sed "s/^$name: //")
upper=$(printf '%s' "$name" | tr 'a-z-' 'A-Z_')
{
  printf '.TH %s 1 "" "%s %s" "User Commands"\n' "$upper" "$name" "$version"
  printf '.SH NAME\n%s \\- %s\n' "$name" "$(printf '%s' "$summary" | esc)"
  printf '.SH SYNOPSIS\n.B %s\n[\\fIOPTIONS\\fR] \\fISUBCOMMAND\\fR [\\fIARGS\\fR]\n' "$name"
  printf '.SH DESCRIPTION\n.nf\n'
  printf '%s\n' "$help" | tail -n +2 | esc
  printf '.fi\n.SH SUBCOMMANDS\n'
  for sub in $(printf '%s\n' "$help" | sed -n '/^Subcommands:/,$p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p'); do
    printf '.SS %s\n.nf\n' "$sub"
    "$bin" "$sub" --help 2>&1 | esc
    printf '.fi\n'
  done
  printf '.SH FILES\n.TP\n/etc/%s/\nconfiguration (see /usr/share/doc/%s/)\n.TP\n/var/lib/%s/\nstate: keys, certificates, databases\n' "$name" "$name" "$name"
  printf '.SH SEE ALSO\n.BR systemctl (1),\n.BR journalctl (1)\n'
} | gzip -9n > "$out"
