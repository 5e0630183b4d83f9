# The exec helper for images without a usable python3 (POSIX sh, coreutils
# or busybox).  Not sourced by the runner: passed to `sh -c` inside the
# container as root, once per sandbox; it then serves every execute,
# read_file and write_file arriving on its stdin.  See _exec_channel.py.
#
# Requests (runner -> helper), text, after a first line with a random token
# (stdin is the runner's alone: no process in the container can read it):
#   TOKEN OP ID USER A B NSTRINGS      one line; USER is UID:GID or - (root)
#   then NSTRINGS strings, each as a line with its number of lines, then
#   those lines (a string with k newlines is k+1 lines), so any byte but
#   NUL passes, and reading it needs no process (`read` is a builtin); a
#   string of many lines comes as "bN" and N raw bytes instead (joining
#   lines one by one would take time quadratic in their number).
#   write: then exactly B raw bytes (the body).
#   kill ID: stop the request ID (its deadline passed on the runner's side).
#   stream: an exec whose output is also sent as it comes (`relay`), in
#   output frames before the answer (the runner shows its progress).
# A line without the token, or with a field out of shape, ends the helper:
# were the stream ever out of step (a body read short), a file's bytes must
# not be taken for a request.
# Answers (helper -> runner): the Python helper's frames, byte for byte
# (4-byte header length, JSON header, 8-byte body length, body), written
# by one process only (`writer`), so concurrent answers never interleave.
#
# Every request runs in a job of its own, in the background; commands and
# file operations run as the request's user (setpriv or nsenter, probed at
# start), in a process group of their own (setsid).  What a process of the
# user's writes goes into a FIFO that root reads with a bound, never into a
# file of root's (the user can trace its own processes and write through
# their descriptors); root's files are in a directory only root can enter.
#
# The helper's own tools are looked up in root's directories only
# (`safe_path`), never in the container's PATH, which may name a directory
# the agent can write; commands get the container's environment back as it
# was when the helper started (`RUNNER_ENV0`), whatever names the helper uses.

RUNNER_ENV0=$(export -p)  # first, before any variable of the helper's is set
set -f
UMASK=$(umask)  # the commands' (the helper's own files get 077)
umask 077
LF='
'
found() { if command -v "$1" >/dev/null 2>&1; then echo true; else echo false; fi; }
# With the container's PATH: what commands will find.
FOUND="{\"bash\": $(found bash), \"timeout\": $(found timeout), \"sleep\": $(found sleep)}"

# safe_path: the usual directories that exist and are root's and writable
# by root only (a directory the agent can write would let it plant a `dd`
# that root runs)
safe_path() {
    SAFE=
    for dir in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
        [ -d "$dir" ] || continue
        # shellcheck disable=SC2046 # mode, links, owner, ...
        set -- $(ls -ldnL "$dir" 2>/dev/null)
        case $1 in d????-??-*) ;; *) continue ;; esac
        [ "$3" = 0 ] && SAFE=$SAFE${SAFE:+:}$dir
    done
}
safe_path
PATH=$SAFE
[ -n "$PATH" ] || exit 1
# Absolute where the tool is a file (a busybox applet stays a name: busybox's
# sh runs its own applets whatever PATH says): they run after the
# container's environment, its PATH included, is given back to a command.
SETSID=$(command -v setsid) || exit 1
ENV_TOOL=$(command -v env) || exit 1
# Its files: on the root-only tmpfs the runner mounts (which the agent cannot
# fill), else in /tmp; either way in a directory only root can enter.
D=
for base in /run/sandbox-runner /tmp; do
    D=$(mktemp -d "$base/.runner-channel.XXXXXX" 2>/dev/null) && break
done
[ -n "$D" ] || exit 1
W=
trap '[ -n "$W" ] && kill "$W" 2>/dev/null; rm -rf "$D"' EXIT
mkfifo "$D/n" || exit 1
exec 3<>"$D/n"  # the jobs' notes to the writer: one line each, atomic

# How to become the sandbox user: setpriv (util-linux), or nsenter with no
# namespace (util-linux and busybox).  Both clear the supplementary groups.
DROP=
if [ "$(setpriv --reuid=65534 --regid=65534 --clear-groups -- id -u 2>/dev/null)" = 65534 ]; then
    DROP=$(command -v setpriv) DROP_KIND=setpriv
elif [ "$(nsenter -S 65534 -G 65534 -- id -u 2>/dev/null)" = 65534 ]; then
    DROP=$(command -v nsenter) DROP_KIND=nsenter
fi

CAN_DROP=false
[ -n "$DROP" ] && CAN_DROP=true

# user UID:GID -> $@ prefix for running as that user (nothing for -)
as_user() {
    case $1 in
    -) AS= ;;
    *)
        u=${1%%:*} g=${1#*:}
        case $DROP_KIND in
        setpriv) AS="$DROP --reuid=$u --regid=$g --clear-groups --" ;;
        nsenter) AS="$DROP -S $u -G $g --" ;;
        *) AS=unavailable ;;
        esac
        ;;
    esac
}

# --- answers ------------------------------------------------------------------

# be N COUNT: N as COUNT big-endian bytes, as printf %b escapes, in R
be() {
    R= i=$2
    while [ "$i" -gt 0 ]; do
        i=$((i - 1))
        b=$((($1 >> (8 * i)) & 255))
        R="$R\\0$(((b >> 6) * 100 + ((b >> 3) & 7) * 10 + (b & 7)))"
    done
}

# frame HEADER BODYLEN: the frame's head; the caller writes the body after it
frame() {
    be ${#1} 4
    h=$R
    be "$2" 8
    printf '%b%s%b' "$h" "$1" "$R"
}

fail_answer() { frame "{\"id\": $1, \"error\": \"$2\", \"message\": \"$3\"}" 0; }

# stream FILE A B T MARKED: a command's output as kept by `capture`: the
# first A bytes of FILE, the cut marker if MARKED (OMITTED bytes), the last B
# bytes of FILE, then all of FILE.t (T bytes)
stream() {
    [ "$2" -gt 0 ] && head -c "$2" "$1"
    [ "$5" = 1 ] && printf '\n[... %s bytes omitted ...]\n' "$OMITTED"
    [ "$3" -gt 0 ] && tail -c "$3" "$1"
    [ "$4" -gt 0 ] && cat "$1.t"
}

# kept TOTAL A B T MARKED: how many bytes `stream` sends (in KEPT), and the
# bytes omitted (in OMITTED)
kept() {
    OMITTED=$(($1 - $2 - $3 - $4))
    KEPT=$(($2 + $3 + $4))
    if [ "$5" = 1 ]; then
        MARK="
[... $OMITTED bytes omitted ...]
"
        KEPT=$((KEPT + ${#MARK}))
    fi
}

writer() {
    GARBAGE= COUNT=0
    while read -r wid kind x1 x2 x3 x4 x5 rest <&3; do
        f=$D/$wid
        case $kind in
        ping)
            frame "{\"id\": $wid, \"ok\": true, \"pid\": $$, \"found\": $FOUND, \"sealed\": false, \"can_drop\": $CAN_DROP}" 0
            ;;
        exec) # code, timed out, then per stream: total A B T MARKED (see stream)
            set -- $x1 $x2 $x3 $x4 $x5 $rest
            kept "$3" "$4" "$5" "$6" "$7"
            out_kept=$KEPT
            kept "$8" "$9" "${10}" "${11}" "${12}"
            frame "{\"id\": $wid, \"exit_code\": $1, \"timed_out\": $2, \"stdout_total\": $3, \"stdout_len\": $out_kept, \"stderr_total\": $8}" $((out_kept + KEPT))
            kept "$3" "$4" "$5" "$6" "$7"
            stream "$f.o" "$4" "$5" "$6" "$7"
            kept "$8" "$9" "${10}" "${11}" "${12}"
            stream "$f.e" "$9" "${10}" "${11}" "${12}"
            ;;
        read) # x1 size, x2 bytes sent (root's file: nobody else writes it)
            frame "{\"id\": $wid, \"ok\": true, \"size\": $x1}" "$x2"
            [ "$x2" -gt 0 ] && cat "$f.d"
            ;;
        write) frame "{\"id\": $wid, \"ok\": true}" 0 ;;
        chunk) # x1 the stream, x2 the size, x3 gap, x4 the file (see relay)
            frame "{\"id\": $wid, \"output\": \"$x1\", \"gap\": $x3}" "$x2"
            cat "$x4"
            rm -f "$x4"  # sent: the relay may offer the next piece
            continue  # not the request's answer
            ;;
        error) # x1 the error's name, then its message (letters, digits, spaces)
            message="$x2 $x3 $x4 $x5 $rest"
            message=${message%"${message##*[! ]}"}
            fail_answer "$wid" "$x1" "${message:-no space left in the helper directory}"
            ;;
        esac
        : >"$f.a"  # answered: a late kill must not touch what is left of it
        # Emptied now, removed 16 answers at a time: one rm, not one each.
        for name in o o.t o.s o.r o.z o.b o.i e e.t e.s e.r e.z e.b e.i d m w; do
            [ -e "$f.$name" ] && : >"$f.$name"
        done
        GARBAGE="$GARBAGE $f.o $f.o.t $f.o.s $f.o.r $f.o.z $f.e $f.e.t $f.e.s $f.e.r $f.e.z"
        GARBAGE="$GARBAGE $f.d $f.m $f.w $f.t $f.x $f.a $f.k.* $f.l.* $f.s*"
        GARBAGE="$GARBAGE $f.o.b $f.o.i $f.o.c $f.o.p $f.e.b $f.e.i $f.e.c $f.e.p"
        case $kind in
        exec) GARBAGE="$GARBAGE ${13}.o ${13}.e" ;;
        read | write) GARBAGE="$GARBAGE $x3.o $x3.e" ;;
        esac
        COUNT=$((COUNT + 1))
        if [ "$COUNT" -ge 16 ]; then
            # Globbing on here: an assignment expands no pattern, and the
            # names with pids or a timeout in them are patterns (ID.k.*).
            set +f
            # shellcheck disable=SC2086 # names without spaces
            rm -f $GARBAGE
            set -f
            GARBAGE= COUNT=0
        fi
    done
}

note() { echo "$*" >&3; }

# fail ID NAME MESSAGE: an error answer; the message keeps letters, digits,
# spaces and . , : - only (it goes into JSON as it is)
fail() {
    case $3 in
    *[!A-Za-z0-9\ .,:-]*) note "$1" error "$2" "the helper could not do it" ;;
    *) note "$1" error "$2" "$3" ;;
    esac
}

# --- jobs ---------------------------------------------------------------------

# run_exec ID USER CAP LIMIT OP: the strings are in S1 (cwd), S2 (shell), S3 (command),
# S4... (NAME=VALUE environment entries)
run_exec() {
    f=$D/$1
    if ! cd -P -- "$S1" 2>/dev/null; then
        MARK="cannot change directory to $S1: no such directory$LF"
        printf '%s' "$MARK" >"$f.e"
        size=$(($(wc -c <"$f.e")))
        note "$1" exec 126 false 0 0 0 0 0 "$size" "$size" 0 0 0 "$P"
        return
    fi
    as_user "$2"
    if [ "$AS" = unavailable ]; then
        fail "$1" OSError "no setpriv or nsenter to run commands as $2"
        return
    fi
    id=$1 cap=$3 limit=$4 op=$5
    # The whole command line, in the positional parameters before the
    # container's environment comes back (it may hold any of our names).
    # shellcheck disable=SC2086 # AS is a fixed prefix without spaces in its parts
    set -- "$SETSID" $AS
    [ "$NS" -gt 3 ] && set -- "$@" "$ENV_TOOL" --
    i=4
    while [ "$i" -le "$NS" ]; do
        eval "set -- \"\$@\" \"\$S$i\""
        i=$((i + 1))
    done
    set -- "$@" "$S2" -c "$S3"
    if [ "$op" = stream ]; then  # its relays note the pieces: fd 3 stays open
        capture_streamed "$P.o" "$f.o" "$cap" "$id" stdout &
        co=$!
        capture_streamed "$P.e" "$f.e" "$cap" "$id" stderr &
        ce=$!
    else
        capture "$P.o" "$f.o" "$cap" 3>&- &
        co=$!
        capture "$P.e" "$f.e" "$cap" 3>&- &
        ce=$!
    fi
    umask "$UMASK"
    (
        unset OLDPWD
        # The sandbox user's commands: the OOM killer's first choice (see
        # USER_OOM_SCORE_ADJ in the Python helper)
        [ -z "$AS" ] || echo 1000 2>/dev/null >/proc/self/oom_score_adj
        eval "$RUNNER_ENV0"
        exec "$@"
    ) </dev/null >"$P.o" 2>"$P.e" 3>&- &
    pid=$!
    : >"$f.k.$pid.$co.$ce"  # in its name: a full tmpfs still takes an empty file
    : >"$f.l.$limit"  # its timeout, from this file's time: see the end of the stream
    wait "$pid"
    code=$?
    : >"$f.x"  # reaped: its pid may be another's from now on (see stop)
    wait "$co"
    out_lost=$?
    wait "$ce"
    err_lost=$?
    timed_out=false
    if [ -e "$f.t" ]; then
        code=124 timed_out=true
    fi
    # OUT's and OUT.t's sizes: as capture found them, else from stat
    if read -r h1 t1 2>/dev/null <"$f.o.z" && read -r h2 t2 2>/dev/null <"$f.e.z"; then
        set -- "$h1" "$t1" "$h2" "$t2"
    else
        # shellcheck disable=SC2046 # four numbers
        set -- $(stat -c %s -- "$f.o" "$f.o.t" "$f.e" "$f.e.t")
    fi
    plan "$f.o" "$cap" "$1" "$2" "$out_lost"
    out=$PLAN
    plan "$f.e" "$cap" "$3" "$4" "$err_lost"
    note "$id" exec "$code" "$timed_out" $out $PLAN "$P"
}

# pipes: a fresh pair of FIFOs for a command's output, P.o and P.e (in P);
# made 32 pairs at a time: one mkfifo, not one each
pipes() {
    if [ "$PIPES_NEXT" -ge "$PIPES_END" ]; then
        set --
        i=$PIPES_END
        PIPES_END=$((PIPES_END + 32))
        while [ "$i" -lt "$PIPES_END" ]; do
            set -- "$@" "$D/p$i.o" "$D/p$i.e"
            i=$((i + 1))
        done
        mkfifo "$@" || return 1
    fi
    P=$D/p$PIPES_NEXT
    PIPES_NEXT=$((PIPES_NEXT + 1))
}

# report FILE COUNT: read dd's report in FILE: WHOLE says whether it read
# COUNT whole blocks ("A+B records in": A, with no partial one, B); BYTES how
# many bytes it copied, or nothing if it does not say (busybox does not)
report() {
    WHOLE=false BYTES=
    while read -r n what rest; do
        case $what in
        records) [ "$n" = "$2+0" ] && [ "${rest#in}" != "$rest" ] && WHOLE=true ;;
        byte | bytes) BYTES=$n ;;
        esac
    done <"$1"
}

# capture FIFO OUT CAP: read the stream to its end (a command must never die
# of writing its output), keeping its first 2*HALF bytes in OUT (HALF: CAP /
# 2), and, if there is more, the last HALF of the rest in OUT.t and the
# rest's length in OUT.r, as the Python helper keeps a head and a tail.  dd
# reads exactly the blocks asked (iflag=fullblock); one dd is all a command
# with a short output costs.  Where dd says how many bytes it copied (GNU),
# OUT's and OUT.t's sizes go to OUT.z, and nobody needs to stat them.
capture() {
    exec <"$1"
    half=$(($3 / 2))
    [ "$half" -lt 1 ] && half=1
    first=$((2 * half)) more=true size=0
    : >"$2.t"
    if [ $((first / 65536)) -gt 0 ]; then
        if ! LC_ALL=C dd bs=65536 count=$((first / 65536)) iflag=fullblock 2>"$2.s" >"$2"; then
            wc -c >"$2.r"  # OUT could not be written (no space): count the rest
            return 1
        fi
        report "$2.s" $((first / 65536))
        more=$WHOLE size=$BYTES
    else
        : >"$2"
    fi
    if $more && [ $((first % 65536)) -gt 0 ]; then
        if ! LC_ALL=C dd bs=$((first % 65536)) count=1 iflag=fullblock 2>"$2.s" >>"$2"; then
            wc -c >"$2.r"
            return 1
        fi
        report "$2.s" 1
        more=$WHOLE
        [ -n "$size" ] && [ -n "$BYTES" ] && size=$((size + BYTES)) || size=
    fi
    if $more; then
        mkfifo "$2.q"
        tail -c "$half" <"$2.q" >"$2.t" &
        tee "$2.q" | wc -c >"$2.r" || return 1
        wait "$!" || return 1
        rm -f "$2.q"
        read -r rest <"$2.r"
        [ -n "$size" ] && echo "$size $((rest < half ? rest : half))" >"$2.z"
    else
        [ -n "$size" ] && echo "$size 0" >"$2.z"
    fi
    return 0
}

# capture_streamed FIFO OUT CAP ID STREAM: `capture`, the stream passing
# through `relay` first, which also sends it to the runner as it comes
capture_streamed() {
    mkfifo "$2.p" || return 1
    relay "$4" "$5" "$2" <"$1" >"$2.p" &
    relayed=$!
    capture "$2.p" "$2" "$3" 3>&-
    captured=$?
    wait "$relayed"  # its last piece is offered before the answer is noted
    return "$captured"
}

# relay ID STREAM OUT: stdin to stdout as it comes (one read at a time: dd
# without fullblock), each piece also offered to the writer at once, in a
# file of its own (OUT.cN) and a note: the writer sends it in an output
# frame (`chunk`) and removes the file.  The pieces offered and not sent yet
# hold 64 KiB and 64 pieces at most; what comes meanwhile waits in OUT.b,
# offered as soon as there is room (with the next piece, or at the end), and
# past 64 KiB the oldest of it is dropped (the next frame says gap: true, so
# the runner drops the line it cut): a command is never slowed by the
# runner's progress.  While there is room, no piece waits for a later one:
# the relay once kept one piece in flight, and a piece that came while the
# writer sent the last waited for the command's next output, so a quiet
# command's last line showed only when it ended.
# A piece goes to stdout (the capture) through tee, before it is stored:
# where it cannot be stored (the tmpfs full), the capture still gets every
# byte, and the rest passes through unstreamed.
relay() {
    gap=false n=0 queued= waiting=0
    : >"$3.b" || exec cat
    while :; do
        LC_ALL=C dd bs=65536 count=1 2>/dev/null | tee "$3.i" || exec cat
        size=$(($(wc -c <"$3.i")))
        if [ "$size" -gt 0 ]; then
            room
            if [ "$waiting" -eq 0 ] && [ $((held + size)) -le 65536 ] && [ "$count" -lt 64 ]; then
                n=$((n + 1))
                if mv "$3.i" "$3.c$n"; then
                    queued="$queued $3.c$n:$size"
                    note "$1" chunk "$2" "$size" "$gap" "$3.c$n"
                    gap=false
                else
                    gap=true
                fi
                continue
            fi
            if [ $((waiting + size)) -gt 65536 ]; then # the oldest that waits goes
                : >"$3.b"
                waiting=0 gap=true
            fi
            if cat "$3.i" >>"$3.b"; then
                waiting=$((waiting + size))
            else # cut short: never sent, so no line is made of pieces apart
                : >"$3.b"
                waiting=0 gap=true
            fi
        fi
        while [ "$waiting" -gt 0 ]; do # what waits, once the writer has room
            room
            if [ $((held + waiting)) -le 65536 ] && [ "$count" -lt 64 ]; then
                n=$((n + 1))
                mv "$3.b" "$3.c$n" && : >"$3.b"
                queued="$queued $3.c$n:$waiting"
                note "$1" chunk "$2" "$waiting" "$gap" "$3.c$n"
                waiting=0 gap=false
            elif [ "$size" -gt 0 ]; then
                break # the command goes on: offered with its next piece
            else
                sleep 0.01 # the end: its last piece waits for the writer
            fi
        done
        [ "$size" -gt 0 ] || break
    done
}

# room: the bytes (held) and pieces (count) a relay offered that the writer
# has not sent yet (it removes each file it sent)
room() {
    held=0 count=0 still=
    for piece in $queued; do # FILE:SIZE
        [ -e "${piece%:*}" ] || continue
        held=$((held + ${piece##*:})) count=$((count + 1)) still="$still $piece"
    done
    queued=$still
}

# plan OUT CAP HEAD_SIZE TAIL_SIZE STATUS: what `stream` sends of a captured
# stream, as "TOTAL A B T MARKED" in PLAN.  STATUS: capture's; 1 when the
# tmpfs was full (then at least a byte was lost; how many the rest count
# says, if it could be stored); over 128 when `stop` killed it (a process
# that left the command's group held the pipe): what had arrived, as the
# Python helper answers then
plan() {
    rest=
    [ -e "$1.r" ] && read -r rest <"$1.r"
    case $rest in '' | *[!0-9]*) rest=0 ;; esac
    total=$(($3 + rest))
    half=$(($2 / 2))
    [ "$half" -lt 1 ] && half=1
    if [ "$5" -gt 128 ]; then  # killed at the deadline: what had arrived
        PLAN="$(($3 + $4)) $3 0 $4 0"
    elif [ "$5" -ne 0 ]; then
        [ "$total" -le $(($3 + $4)) ] && total=$(($3 + $4 + 1))
        PLAN="$total $3 0 $4 1"  # what could be stored, marked as cut
    elif [ "$rest" -eq 0 ]; then
        PLAN="$total $3 0 0 0"  # all of it is in OUT
    else
        PLAN="$total $half $((half - $4)) $4 1"  # cut as the Python helper does
    fi
}

# The user's side of a read (sh -c READ PATH PIECE SKIP): errors and the
# size to stderr, the piece to stdout.
READ='p=$1
if ! s=$(stat -L -c %s -- "$p" 2>&1); then
  case $s in
  *"Not a directory"*) echo "NotADirectoryError Not a directory" ;;
  *"Permission denied"*) echo "PermissionError Permission denied" ;;
  *"No such file"*) echo "FileNotFoundError No such file or directory" ;;
  *) echo "OSError cannot open the file" ;;
  esac >&2
  exit 1
fi
if [ -d "$p" ]; then echo "IsADirectoryError Is a directory" >&2; exit 1; fi
if [ ! -f "$p" ]; then echo "OSError not a regular file" >&2; exit 1; fi
if [ ! -r "$p" ]; then echo "PermissionError Permission denied" >&2; exit 1; fi
echo "$s" >&2
exec dd if="$p" bs="$2" skip="$3" count=1 2>/dev/null'

# The user's side of a write (sh -c WRITE PATH OFFSET), the body on stdin:
# at offset 0 the file is created or emptied (keeping its mode), later
# pieces are appended.
WRITE='p=$1
classify() {
  case $1 in
  *"Not a directory"*) echo "NotADirectoryError Not a directory" ;;
  *"Permission denied"*) echo "PermissionError Permission denied" ;;
  *"Is a directory"*) echo "IsADirectoryError Is a directory" ;;
  *"No such file"*) echo "FileNotFoundError No such file or directory" ;;
  *"File exists"*) echo "FileExistsError File exists" ;;
  *"Read-only file system"*) echo "OSError Read-only file system" ;;
  *"No space left"*) echo "OSError No space left on device" ;;
  *) echo "OSError cannot write the file" ;;
  esac >&2
  exit 1
}
case $p in */*) d=${p%/*} ;; *) d= ;; esac
if [ -n "$d" ] && [ ! -d "$d" ]; then
  m=$(mkdir -p -- "$d" 2>&1) || classify "$m"
fi
if [ -d "$p" ]; then echo "IsADirectoryError Is a directory" >&2; exit 1; fi
if [ -e "$p" ] && [ ! -f "$p" ]; then echo "OSError not a regular file" >&2; exit 1; fi
if [ "$2" = 0 ]; then m=$( (cat >"$p") 2>&1) || classify "$m"
else m=$( (cat >>"$p") 2>&1) || classify "$m"; fi'

# run_file ID USER KIND SCRIPT LIMIT ARGS...: a read or write as the user.
# The user's process writes only into the FIFOs P.o (a read's bytes) and
# P.e (its report), which root copies with a bound (LIMIT bytes, 256): were
# the agent to trace that process and keep writing through its
# descriptors, it could neither fill root's files nor change what is sent.
run_file() {
    id=$1 kind=$3 script=$4 limit=$5
    f=$D/$id
    as_user "$2"
    shift 5
    umask "$UMASK"
    if [ "$AS" = unavailable ]; then
        fail "$id" OSError "no setpriv or nsenter to open files as the sandbox user"
        return
    fi
    if [ "$kind" = read ]; then
        head -c "$limit" <"$P.o" >"$f.d" 3>&- &
    else
        : >"$f.d"
        (exec <"$P.o") &  # opens it for the user's process, which writes nothing there
    fi
    co=$!
    head -c 256 <"$P.e" >"$f.m" 3>&- &
    ce=$!
    if [ "$kind" = read ]; then
        # shellcheck disable=SC2086
        "$SETSID" $AS sh -c "$script" sh "$@" </dev/null >"$P.o" 2>"$P.e" 3>&- &
    else
        # shellcheck disable=SC2086
        "$SETSID" $AS sh -c "$script" sh "$@" <"$f.w" >"$P.o" 2>"$P.e" 3>&- &
    fi
    pid=$!
    : >"$f.k.$pid.$co.$ce"
    wait "$pid"
    code=$?
    : >"$f.x"
    wait "$co"
    wait "$ce"
    if [ -e "$f.t" ]; then
        fail "$id" TimeoutError "the sandbox did not finish with the file in time"
    elif [ "$code" -ne 0 ]; then
        # From a process of the sandbox user's: used only if it is one of
        # the answers the script gives (the agent may have traced it).
        read -r name message 2>/dev/null <"$f.m"
        case $name in
        FileNotFoundError | IsADirectoryError | PermissionError | NotADirectoryError) ;;
        FileExistsError | OSError) ;;
        *) name=OSError message= ;;
        esac
        case $message in
        '' | *[!A-Za-z\ ]*) message="could not $kind the file" ;;
        esac
        fail "$id" "$name" "$message"
    elif [ "$kind" = read ]; then
        read -r size 2>/dev/null <"$f.m"
        sent=$(($(wc -c <"$f.d")))
        case $size in
        '' | *[!0-9]*)
            # Not the script's report: refuse, unless plainly an empty file.
            if [ "$sent" -ne 0 ] || [ -n "$size" ]; then
                fail "$id" OSError "could not read the file"
                return
            fi
            size=0
            ;;
        esac
        note "$id" read "$size" "$sent" "$P"
    else
        note "$id" write - "$P"
    fi
}

# (`kill -SIG PID` and `kill -SIG -PGID`: the one form dash and busybox both
# read; neither takes `--` after `-s SIG`.)
# stop ID: the runner's deadline for it passed: kill its process group (a
# group with a live member keeps its id, so this cannot reach another's),
# its leader if not yet reaped, and after a grace the readers of its output
# with their children (a process that left the group may hold the pipes
# open for ever).  Nothing if it has been answered already.
stop() {
    f=$D/$1
    set +f
    tries=0
    while :; do
        [ -e "$f.a" ] && return
        set -- "$f".k.*
        [ -e "$1" ] && break  # else not started yet: wait a little
        tries=$((tries + 1))
        [ "$tries" -gt 100 ] && return
        sleep 0.05
    done
    : >"$f.t"
    pids=${1##*.k.} co= ce=
    pid=${pids%%.*}
    case $pids in *.*.*) co=${pids#*.} ce=${co#*.} co=${co%%.*} ;; esac
    kill -KILL "-$pid" 2>/dev/null
    [ -e "$f.x" ] || kill -KILL "$pid" 2>/dev/null
    [ -n "$co" ] || return
    sleep 2
    [ -e "$f.a" ] && return
    kill_tree "$co"
    kill_tree "$ce"
}

# kill_tree PID: a job of ours (a capture, a copy) and its descendants (a
# relay's dd); stopped first, so it cannot start another child while they
# are found
kill_tree() {
    kill -STOP "$1" 2>/dev/null || return
    for stat in /proc/[0-9]*/stat; do
        read -r child comm state parent rest 2>/dev/null <"$stat" || continue
        [ "$parent" = "$1" ] && kill_tree "$child"
    done
    kill -KILL "$1" 2>/dev/null
}

# recv N: exactly N bytes of stdin to stdout (dd reads no further, and
# reads them all even if they cannot be stored)
recv() {
    {
        if [ $(($1 / 65536)) -gt 0 ]; then
            dd bs=65536 count=$(($1 / 65536)) iflag=fullblock 2>/dev/null
        fi
        if [ $(($1 % 65536)) -gt 0 ]; then
            dd bs=$(($1 % 65536)) count=1 iflag=fullblock 2>/dev/null
        fi
    } | {
        cat || {
            cat >/dev/null
            exit 1
        }
    }
}

# --- the loop -----------------------------------------------------------------

writer &
W=$!
read -r TOKEN || exit 0
PIPES_NEXT=0 PIPES_END=0
while read -r token op id user a b n; do
    [ "$token" = "$TOKEN" ] || exit 1
    case $op in ping | exec | stream | read | write | kill) ;; *) exit 1 ;; esac
    case $id$a$b$n in '' | *[!0-9]*) exit 1 ;; esac
    case $user in - | [0-9]*:[0-9]*) ;; *) exit 1 ;; esac
    case ${user#*:}${user%%:*} in *[!0-9-]*) exit 1 ;; esac
    # the strings: S1 ... S$n
    NS=$n i=1
    while [ "$i" -le "$n" ]; do
        read -r lines || exit 0
        case $lines in
        b*)  # N raw bytes (a string of many lines)
            lines=${lines#b}
            case $lines in '' | *[!0-9]*) exit 1 ;; esac
            recv "$lines" >"$D/string" || exit 1
            v=$(cat "$D/string" && echo .)
            v=${v%.}
            ;;
        '' | *[!0-9]*) exit 1 ;;
        *)
            v= j=0
            while [ "$j" -lt "$lines" ]; do
                IFS= read -r line || exit 0
                if [ "$j" -gt 0 ]; then v=$v$LF$line; else v=$line; fi
                j=$((j + 1))
            done
            ;;
        esac
        eval "S$i=\$v"
        i=$((i + 1))
    done
    case $op in
    ping) note "$id" ping ;;
    exec | stream)
        if pipes; then
            run_exec "$id" "$user" "$a" "$b" "$op" </dev/null &
        else
            fail "$id" OSError "could not make the output pipes"
        fi
        ;;
    read)
        if [ "$b" -le 0 ] || [ $((a % b)) -ne 0 ]; then
            fail "$id" ValueError "offset $a is not a multiple of $b"
        elif pipes; then
            run_file "$id" "$user" read "$READ" "$b" "$S1" "$b" $((a / b)) </dev/null &
        else
            fail "$id" OSError "could not make the pipes"
        fi
        ;;
    write)
        if recv "$b" >"$D/$id.w" && pipes; then
            run_file "$id" "$user" write "$WRITE" 0 "$S1" "$a" </dev/null &
        else
            rm -f "$D/$id.w"
            fail "$id" OSError "no space left in the helper directory"
        fi
        ;;
    kill) stop "$id" </dev/null & ;;
    esac
    jobs >/dev/null  # reap the jobs that ended (dash keeps them otherwise)
done

# The end of the stream: the runner is gone (a server killed mid-step), and
# with it the `kill` it sends at each command's deadline.  So the helper
# stays, the in-sandbox watchdog, until every command still running has
# ended or reached its own timeout (its ID.l.SECONDS file's time plus
# SECONDS, and a second of grace) and been stopped; then it exits.
set +f
while :; do
    now=$(date +%s) || break
    running=false
    for l in "$D"/*.l.*; do
        [ -e "$l" ] || continue
        f=${l%.l.*}
        [ -e "$f.x" ] && continue  # reaped
        running=true
        [ -e "$f.t" ] && continue  # being stopped
        started=$(stat -c %Y -- "$l") || continue
        if [ "$now" -gt $((started + ${l##*.l.} + 1)) ]; then
            stop "${f##*/}" </dev/null &
        fi
    done
    $running || break
    sleep 0.5
done
