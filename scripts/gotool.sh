# Sourced by minio.sh and pebble.sh: builds a test server from source with
# the Go toolchain at a pinned version (the only registry we rely on is the
# Go module proxy: no prebuilt downloads), and finds it again.
#
# The caller sets:
#   TOOL          the binary's name (minio)
#   TOOL_MODULE   the module the binary records its version of
#   TOOL_PKG      what go install builds (the module, or a command in it)
#   TOOL_VERSION  the pinned version
#   TOOL_BIN_VAR  the environment variable that names the binary's path
#
# The binary goes to $TOOL_BIN_VAR's path if set, else to $(go env GOBIN)
# or $(go env GOPATH)/bin, which is where internal/testkit/testenv looks for it
# (then on PATH).

tool_bin() {
	if [[ -n "${!TOOL_BIN_VAR:-}" ]]; then
		echo "${!TOOL_BIN_VAR}"
		return
	fi
	local gobin
	gobin="$(go env GOBIN)"
	if [[ -z "$gobin" ]]; then
		gobin="$(go env GOPATH)/bin"
	fi
	echo "$gobin/$TOOL"
}

# installed_version prints the module version the binary was built from.
installed_version() {
	go version -m "$1" 2>/dev/null | awk '$1 == "mod" && $2 == "'"$TOOL_MODULE"'" { print $3 }'
}

cmd_install() {
	local bin
	bin="$(tool_bin)"
	if [[ -x "$bin" && "$(installed_version "$bin")" == "$TOOL_VERSION" ]]; then
		echo "$TOOL $TOOL_VERSION already installed at $bin"
		return
	fi
	echo "building $TOOL $TOOL_VERSION..." >&2
	if [[ -n "${!TOOL_BIN_VAR:-}" ]]; then
		# go install cannot name its output; build into a temporary GOBIN and move.
		local tmp
		tmp="$(mktemp -d)"
		trap 'rm -rf "$tmp"' RETURN
		GOBIN="$tmp" go install "$TOOL_PKG@$TOOL_VERSION"
		mkdir -p "$(dirname "$bin")"
		mv "$tmp/$TOOL" "$bin"
	else
		# Another process (a background install on a dev machine) may be
		# building the same thing; go's build cache makes the second one cheap.
		go install "$TOOL_PKG@$TOOL_VERSION"
	fi
	echo "installed $TOOL $TOOL_VERSION at $bin"
}

cmd_path() {
	local bin
	bin="$(tool_bin)"
	if [[ -x "$bin" ]]; then
		echo "$bin"
	elif command -v "$TOOL" >/dev/null; then
		command -v "$TOOL"
	else
		echo "$TOOL not installed: run 'bash scripts/$TOOL.sh install'" >&2
		exit 1
	fi
}
