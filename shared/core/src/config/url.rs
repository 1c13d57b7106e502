//! What a URL in `floe.toml` gives away: whether a credential sent to it crosses the
//! network in clear text ([`insecure`]), and whether it names a user itself.

/// Whether a credential sent to `url` would cross the network in clear text: a plain
/// `http://` URL whose host is not this machine.
pub fn insecure(url: &str) -> bool {
    url.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://")) && leaves_the_machine(url)
}

/// Whether a plain `http://` URL leaves this machine: its host is not `localhost` or a
/// loopback address (`127.0.0.0/8`, `[::1]`).
pub(super) fn leaves_the_machine(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    !loopback
}

/// Whether a URL names a user (and maybe a password) before its host.
pub(super) fn url_has_credentials(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split(['/', '?', '#']).next().is_some_and(|authority| authority.contains('@'))
}
