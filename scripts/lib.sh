# Shared by scripts/test and scripts/demo: make sure .venv holds migplan and its tools.
# Source it; it defines ensure_venv and exports VENV.

VENV=${MIGPLAN_VENV:-$PWD/.venv}
export VENV
# The repository root holds a folder named `operator`, which would shadow the standard
# library for any `python -m ...` started here: never put the current directory on sys.path.
export PYTHONSAFEPATH=1

log() { printf '[%s] %s\n' "${0##*/}" "$*" >&2; }

# ensure_venv: create the virtual environment and (re)install migplan in editable mode with
# the dev extras, pinned by constraints.txt, whenever pyproject.toml or the pins change.
ensure_venv() {
  local python=${PYTHON:-python3}
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    log "error: migplan needs Python 3.11 or newer; '$python' is $("$python" --version 2>&1)."
    log "Set PYTHON=/path/to/python3.11 and run again."
    return 1
  fi
  local stamp="$VENV/.migplan-installed"
  local want
  want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return 0
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating virtual environment $VENV"
    "$python" -m venv "$VENV"
  fi
  log "installing migplan and its dependencies into $VENV (first run takes about a minute)"
  local install_log="$VENV/install.log"
  if ! { "$VENV/bin/python" -m pip install --disable-pip-version-check --upgrade pip &&
         "$VENV/bin/python" -m pip install --disable-pip-version-check \
           -c constraints.txt -e '.[dev]'; } > "$install_log" 2>&1; then
    tail -n 30 "$install_log" >&2
    log "error: installing migplan failed; the whole log is in $install_log"
    return 1
  fi
  echo "$want" > "$stamp"
}

# ensure_image_tools: buildah and debootstrap, which the image tests build with (no container
# daemon). Installed from Debian's packages where this user may; otherwise stop with the reason.
ensure_image_tools() {
  local missing=()
  command -v buildah > /dev/null || missing+=(buildah)
  command -v debootstrap > /dev/null || missing+=(debootstrap)
  ((${#missing[@]} == 0)) && return 0
  if [[ $(id -u) != 0 ]] || ! command -v apt-get > /dev/null; then
    log "error: the image tests need ${missing[*]}; install them (Debian/Ubuntu:"
    log "  sudo apt-get install ${missing[*]}) and run again."
    return 1
  fi
  log "installing ${missing[*]} from Debian's packages"
  local apt_log
  apt_log=$(mktemp)
  if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" ||
         { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"; }
       } > "$apt_log" 2>&1; then
    tail -n 20 "$apt_log" >&2
    log "error: installing ${missing[*]} failed (log above)"
    return 1
  fi
}
