#!/bin/sh
# `apt-get install PKG...` for the Dockerfile.debian images, which build FROM
# the lab's base (BASE_IMAGE, default benchlab/base:bookworm: a debootstrap
# minbase tree whose sources list only the release's main suite).
#
# APT_SOURCES (build argument, optional): the text of the host's apt sources
# (deb822 /etc/apt/sources.list.d/debian.sources, or one-line sources.list).
# With it the image installs the same package versions as the host's bare
# runs (bookworm-security's php8.2, not bookworm's); debian-compose.sh passes
# it. Empty: the base's own sources are used.
set -eu
if [ -n "${APT_SOURCES:-}" ]; then
    case "$APT_SOURCES" in
        *URIs:*)
            printf '%s\n' "$APT_SOURCES" >/etc/apt/sources.list.d/debian.sources
            rm -f /etc/apt/sources.list ;;
        *)
            printf '%s\n' "$APT_SOURCES" >/etc/apt/sources.list ;;
    esac
fi
# no maintainer script may start a daemon (mariadb, nginx, php-fpm) in a build
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
rm -f /usr/sbin/policy-rc.d
rm -rf /var/lib/apt/lists/*
# the build log says which versions went in
dpkg-query -W -f='installed ${Package} ${Version}\n' "$@"
