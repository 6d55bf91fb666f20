/* The commands a custom template build runs in its build sandbox (templates/build.c), each
 * as /bin/sh -c SCRIPT sh ARGS...: arguments are never spliced into the script. */
#include "build_scripts.h"

const char TEMPLATE_APT_SCRIPT[] =
    "set -e\n"
    "if [ -f " INPUTS "/sources.list ]; then\n"
    "  cp " INPUTS "/sources.list /etc/apt/sources.list\n"
    "  rm -f /etc/apt/sources.list.d/*\n"
    "fi\n"
    /* Packages' maintainer scripts run; services they would start do not. */
    "printf '#!/bin/sh\\nexit 101\\n' >/usr/sbin/policy-rc.d\n"
    "chmod 0755 /usr/sbin/policy-rc.d\n"
    "apt-get -q update\n"
    "apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "
    "install --no-install-recommends \"$@\"\n"
    "rm -f /usr/sbin/policy-rc.d\n";

/* $0 is the registry; npm is told the sandbox's proxy outright (it reads only some of the
 * proxy variables by itself). */
const char TEMPLATE_NPM_SCRIPT[] =
    "set -e\n"
    "command -v npm >/dev/null || { echo 'npm_packages need npm in the from template' >&2; "
    "exit 127; }\n"
    "npm install --global --no-audit --no-fund --no-update-notifier --registry \"$0\" "
    "--proxy \"$http_proxy\" --https-proxy \"$https_proxy\" \"$@\"\n"
    "rm -rf /root/.npm\n";

const char TEMPLATE_FILES_SCRIPT[] =
    "set -e\n"
    "while [ $# -gt 0 ]; do install -D -m \"$2\" " INPUTS "/\"$1\" \"$3\"; shift 3; done\n";

/* The start command runs at every cold boot of the template (the agent runs
 * /usr/lib/sbx/start), after the parent's own start, which keeps its name; the ready check
 * becomes /usr/lib/sbx/ready, which the agent runs until it passes before it says HELLO. */
const char TEMPLATE_READY_SCRIPT[] =
    "set -e\n"
    "if [ -n \"$1\" ]; then\n"
    "  install -d /usr/lib/sbx\n"
    "  [ -e /usr/lib/sbx/start ] && mv -f /usr/lib/sbx/start /usr/lib/sbx/start.from-\"$3\"\n"
    "  printf '%s\\n' \"$1\" >/usr/lib/sbx/start_command.\"$5\"\n"
    "  { echo '#!/bin/sh'\n"
    "    echo '# sbx: the template start_command, after the parent template start'\n"
    "    echo \"[ -x /usr/lib/sbx/start.from-$3 ] && /usr/lib/sbx/start.from-$3 &\"\n"
    "    echo 'cd /workspace 2>/dev/null || cd /'\n"
    "    echo \"exec /bin/sh /usr/lib/sbx/start_command.$5 </dev/null >>/tmp/sbx-start.log 2>&1\"\n"
    "  } >/usr/lib/sbx/start\n"
    "  chmod 0755 /usr/lib/sbx/start\n"
    "  /usr/lib/sbx/start </dev/null >/dev/null 2>&1 &\n"
    "fi\n"
    "if [ -n \"$2\" ]; then\n"
    "  install -d /usr/lib/sbx\n"
    "  { echo '#!/bin/sh'; printf '%s\\n' \"$2\"; } >/usr/lib/sbx/ready\n"
    "  chmod 0755 /usr/lib/sbx/ready\n"
    "  i=0\n"
    "  until /usr/lib/sbx/ready; do\n"
    "    i=$((i+1))\n"
    "    if [ $i -ge $4 ]; then echo \"ready_check did not pass in $(($4/5)) s\" >&2; exit 1; "
    "fi\n"
    "    sleep 0.2\n"
    "  done\n"
    "fi\n";

const char TEMPLATE_FINISH_SCRIPT[] =
    "apt-get clean >/dev/null 2>&1 || true\n"
    "rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /root/.npm /root/.cache\n"
    "find /var/log -type f -delete 2>/dev/null || true\n"
    "dpkg-query -W -f='${Package}=${Version}\\n' 2>/dev/null | LC_ALL=C sort\n"
    "echo --npm--\n"
    "if command -v node >/dev/null; then\n"
    "  for p in /usr/local/lib/node_modules/*/package.json "
    "/usr/local/lib/node_modules/@*/*/package.json; do\n"
    "    [ -f \"$p\" ] && node -e 'const j=require(process.argv[1]); "
    "console.log(j.name+\"@\"+j.version)' \"$p\"\n"
    "  done | LC_ALL=C sort\n"
    "fi\n"
    "exit 0\n";
