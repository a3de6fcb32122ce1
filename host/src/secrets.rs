//! Masking secrets in what mcpproxy shows: URLs (user info and query values) and
//! secret-looking command-line arguments.

/// `url` with its user info and every query value shown as `***`.
pub fn mask_url(url: &str) -> String {
    let (head, fragment) = url
        .split_once('#')
        .map_or((url, None), |(h, f)| (h, Some(f)));
    let (base, query) = head
        .split_once('?')
        .map_or((head, None), |(b, q)| (b, Some(q)));
    let mut out = match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.find('/').map_or((rest, ""), |at| rest.split_at(at));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            let userinfo = if authority.contains('@') { "***@" } else { "" };
            format!("{scheme}://{userinfo}{host}{path}")
        }
        None => base.to_owned(),
    };
    if let Some(query) = query {
        out.push('?');
        let masked: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) => format!("{key}=***"),
                None => pair.to_owned(),
            })
            .collect();
        out.push_str(&masked.join("&"));
    }
    if fragment.is_some() {
        out.push_str("#***");
    }
    out
}

/// Arguments with secret-looking values hidden: the value after a flag such as `--token`,
/// and `KEY=value` where the key looks secret.
pub fn mask_args(args: &[String]) -> Vec<String> {
    let secret = |key: &str| {
        let key: String = key
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        [
            "password",
            "passwd",
            "token",
            "secret",
            "apikey",
            "authorization",
            "cookie",
            "privatekey",
            "credential",
        ]
        .iter()
        .any(|k| key.contains(k))
            || key.ends_with("key")
    };
    let mut shown = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for arg in args {
        if hide_next {
            shown.push("<hidden>".to_owned());
            hide_next = false;
            continue;
        }
        match arg.split_once('=') {
            Some((key, _)) if secret(key) => shown.push(format!("{key}=<hidden>")),
            _ => {
                hide_next = arg.starts_with('-') && secret(arg);
                shown.push(arg.clone());
            }
        }
    }
    shown
}
