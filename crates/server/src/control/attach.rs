//! The first line a front-end may send on the control socket before anything else, to say
//! what the connection is for (a line starting with `@`, which neither JSON-RPC nor HTTP
//! starts with):
//!
//! - `@server NAME`: an MCP session in newline-delimited JSON-RPC that sees upstream `NAME`
//!   only (its tools, prompts and resources under their own names), as
//!   `/mcp/servers/NAME` does over HTTP. The owner answers `ok`, or `error <why>` and
//!   closes.
//! - `@watch`: nothing more is sent either way; the owner holds the connection open while it
//!   runs, so its end (the owner stopped or died) is the front-end's sign to take the data
//!   dir over.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The longest first line the owner reads.
const MAX_LINE: u64 = 1024;

/// What a front-end's connection is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preamble {
    /// An MCP session of one upstream's direct endpoint.
    Server(String),
    /// A connection held open while the owner runs.
    Watch,
}

impl Preamble {
    /// The line a front-end sends, newline included.
    pub fn line(&self) -> String {
        match self {
            Self::Server(name) => format!("@server {name}\n"),
            Self::Watch => "@watch\n".to_owned(),
        }
    }

    /// Reads a preamble line (the caller saw its `@`); an error names what was wrong.
    pub async fn read<R: AsyncBufRead + Unpin>(reader: &mut R) -> Result<Self, String> {
        let mut line = String::new();
        let read = (&mut *reader).take(MAX_LINE).read_line(&mut line).await;
        if read.is_err() || !line.ends_with('\n') {
            return Err(format!(
                "the first line must be `@server NAME` or `@watch`, ended by a newline, within {MAX_LINE} bytes"
            ));
        }
        let line = line.trim_end();
        if line == "@watch" {
            return Ok(Self::Watch);
        }
        match line.strip_prefix("@server ") {
            Some(name) if !name.is_empty() => Ok(Self::Server(name.to_owned())),
            _ => Err(format!(
                "unknown first line '{}': use `@server NAME` or `@watch`",
                mcpproxy_support::quote(line)
            )),
        }
    }
}

/// The owner's answer to `@server NAME`: `ok`, or `error <why>` (one line, control
/// characters escaped).
pub async fn answer<W: AsyncWrite + Unpin>(
    write: &mut W,
    result: &Result<(), String>,
) -> std::io::Result<()> {
    let line = match result {
        Ok(()) => "ok\n".to_owned(),
        Err(why) => format!("error {}\n", mcpproxy_support::quote(why)),
    };
    write.write_all(line.as_bytes()).await?;
    write.flush().await
}

/// Sends `preamble` on a fresh connection and, for `@server`, reads the owner's answer.
pub async fn send<S>(
    stream: &mut tokio::io::BufReader<S>,
    preamble: &Preamble,
) -> Result<(), String>
where
    S: tokio::io::AsyncRead + AsyncWrite + Unpin,
{
    let sent = stream.get_mut().write_all(preamble.line().as_bytes()).await;
    sent.map_err(|e| format!("the owner closed the connection: {e}"))?;
    if *preamble == Preamble::Watch {
        return Ok(());
    }
    let mut line = String::new();
    match (&mut *stream).take(MAX_LINE * 4).read_line(&mut line).await {
        Ok(0) | Err(_) => Err("the owner closed the connection before answering".to_owned()),
        Ok(_) => match line.trim_end().strip_prefix("error ") {
            Some(why) => Err(why.to_owned()),
            None if line.trim_end() == "ok" => Ok(()),
            None => Err(format!(
                "the owner answered '{}' instead of `ok`",
                mcpproxy_support::quote(line.trim_end())
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_what_it_writes_and_names_a_bad_line() {
        for preamble in [Preamble::Watch, Preamble::Server("fs".into())] {
            let line = preamble.line();
            let mut reader = tokio::io::BufReader::new(line.as_bytes());
            assert_eq!(Preamble::read(&mut reader).await, Ok(preamble));
        }
        let mut reader = tokio::io::BufReader::new(&b"@serve x\n"[..]);
        let err = Preamble::read(&mut reader).await.unwrap_err();
        assert!(
            err.contains("@serve x") && err.contains("@server NAME"),
            "{err}"
        );
        let long = format!("@server {}\n", "a".repeat(2000));
        let mut reader = tokio::io::BufReader::new(long.as_bytes());
        assert!(Preamble::read(&mut reader).await.is_err());
    }

    #[tokio::test]
    async fn an_answer_round_trips() {
        let (client, server) = tokio::io::duplex(4096);
        let mut client = tokio::io::BufReader::new(client);
        let owner = tokio::spawn(async move {
            let mut server = tokio::io::BufReader::new(server);
            let preamble = Preamble::read(&mut server).await.unwrap();
            assert_eq!(preamble, Preamble::Server("nope".into()));
            answer(server.get_mut(), &Err("no upstream 'nope'\nhere".into()))
                .await
                .unwrap();
        });
        let err = send(&mut client, &Preamble::Server("nope".into()))
            .await
            .unwrap_err();
        owner.await.unwrap();
        assert_eq!(err, "no upstream 'nope'\\u{a}here");
    }
}
