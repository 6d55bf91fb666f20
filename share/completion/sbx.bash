# bash completion for sbx (docs/cli.md). Installed by `make install` into
# $PREFIX/share/bash-completion/completions/sbx; or: source share/completion/sbx.bash

_sbx_ids() {
    # Live sandbox ids, from the first column of `sbx ls`; quiet when the server is away.
    sbx ls 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_sbx() {
    local cur prev words cword
    _init_completion -n : 2>/dev/null || {
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    }
    local commands="create ls get rm pause resume fork snapshot preview egress exec run logs
        cp files artifacts code terminal login keys audit help"
    local sandbox_opts="--template --ttl --env --allow --preset --no-egress --backend --snapshot"

    # The command is the first word that is not --json.
    local i cmd="" cmd_at=0
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} != --json ]]; then
            cmd=${words[i]}
            cmd_at=$i
            break
        fi
    done
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$commands --json" -- "$cur"))
        return
    fi

    case $prev in
    --template | -t | --ttl | --env | -e | --snapshot | --count | -n | --cwd | --timeout | \
        --session | --command | -c | --attach | --user | -u | --action | -a | --limit | --url)
        return ;;
    --backend) COMPREPLY=($(compgen -W "v1 v2" -- "$cur")); return ;;
    --preset | -P) COMPREPLY=($(compgen -W "pypi npm" -- "$cur")); return ;;
    --language | -l) COMPREPLY=($(compgen -W "python bash node" -- "$cur")); return ;;
    --output | -o | --download | -d) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --role | -r) COMPREPLY=($(compgen -W "admin member" -- "$cur")); return ;;
    --tool-level) COMPREPLY=($(compgen -W "none basic sandbox" -- "$cur")); return ;;
    esac

    local opts=""
    case $cmd in
    help) COMPREPLY=($(compgen -W "$commands" -- "$cur")); return ;;
    create) opts=$sandbox_opts ;;
    run) opts="$sandbox_opts --language --output --cwd --timeout" ;;
    exec) opts="--env --cwd --timeout --session" ;;
    fork) opts="--count --ttl" ;;
    preview) opts="--ttl" ;;
    egress) opts="--allow --preset --no-egress" ;;
    logs) opts="--follow" ;;
    files) opts="--recursive" ;;
    artifacts) opts="--download" ;;
    code) opts="--command --reset" ;;
    terminal) opts="--attach" ;;
    login) opts="--url" ;;
    keys) opts="--role --tool-level" ;;
    audit) opts="--verify --sandbox --user --action --limit" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts --json --help" -- "$cur"))
        return
    fi
    case $cmd in
    run) COMPREPLY=($(compgen -f -- "$cur")) ;;
    cp)
        # ID: completes to ID:, anything else is a local path.
        if [[ $cur == *:* ]]; then
            return
        fi
        COMPREPLY=($(compgen -f -- "$cur") $(compgen -W "$(_sbx_ids | sed 's/$/:/')" -- "$cur"))
        compopt -o nospace 2>/dev/null
        ;;
    files)
        if ((cword == cmd_at + 1)); then
            COMPREPLY=($(compgen -W "ls" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$(_sbx_ids)" -- "$cur"))
        fi
        ;;
    keys)
        ((cword == cmd_at + 1)) && COMPREPLY=($(compgen -W "ls create rm" -- "$cur")) ;;
    create | ls | login | audit) ;;
    *)
        # The sandbox id is the first word after the command that is not an option.
        local n=0
        for ((i = cmd_at + 1; i < cword; i++)); do
            [[ ${words[i]} == -* ]] || ((n++))
        done
        ((n == 0)) && COMPREPLY=($(compgen -W "$(_sbx_ids)" -- "$cur"))
        ;;
    esac
}

complete -F _sbx sbx
