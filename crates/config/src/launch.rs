//! A stdio server's launch as configured (program, arguments, environment, working dir), and
//! the one walk over it that the places reading a launch share: the launch fingerprint an
//! approval is bound to (`mcpproxy-trust`), the `${env:}`/`${secret:}` resolution and the
//! spawn (`mcpproxy-upstream`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::Transport;

/// A stdio server's launch, borrowed from the fields of its [`Transport::Stdio`].
#[derive(Debug, Clone, Copy)]
pub struct StdioLaunch<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub working_dir: Option<&'a Path>,
}

/// One part of a stdio launch, as [`StdioLaunch::parts`] gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchPart<'a> {
    Command(&'a str),
    Arg(&'a str),
    Env { name: &'a str, value: &'a str },
    WorkingDir(&'a Path),
}

impl<'a> StdioLaunch<'a> {
    /// Every part, in one fixed order: the command, the arguments in order, the environment
    /// by name, the working dir. Launch fingerprints hash the parts in this order, so it
    /// must never change (an approval would no longer match its launch).
    pub fn parts(self) -> impl Iterator<Item = LaunchPart<'a>> {
        std::iter::once(LaunchPart::Command(self.command))
            .chain(self.args.iter().map(|arg| LaunchPart::Arg(arg)))
            .chain(
                self.env
                    .iter()
                    .map(|(name, value)| LaunchPart::Env { name, value }),
            )
            .chain(self.working_dir.map(LaunchPart::WorkingDir))
    }

    /// This launch as a transport of its own, each environment value replaced by what
    /// `value_of(name, value)` answers (a reference resolved), or the first error.
    pub fn map_env<E>(
        self,
        mut value_of: impl FnMut(&str, &str) -> Result<String, E>,
    ) -> Result<Transport, E> {
        let env = self
            .env
            .iter()
            .map(|(name, value)| Ok((name.clone(), value_of(name, value)?)))
            .collect::<Result<_, E>>()?;
        Ok(Transport::Stdio {
            command: self.command.to_owned(),
            args: self.args.to_vec(),
            env,
            working_dir: self.working_dir.map(PathBuf::from),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio() -> Transport {
        Transport::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "pkg".into()],
            env: BTreeMap::from([
                ("B".to_owned(), "2".to_owned()),
                ("A".to_owned(), "${env:A}".to_owned()),
            ]),
            working_dir: Some(PathBuf::from("/srv")),
        }
    }

    /// The launch of a stdio transport, as the places that read one take it.
    fn launch_of(transport: &Transport) -> StdioLaunch<'_> {
        let Transport::Stdio {
            command,
            args,
            env,
            working_dir,
        } = transport
        else {
            panic!("not stdio");
        };
        StdioLaunch {
            command,
            args,
            env,
            working_dir: working_dir.as_deref(),
        }
    }

    #[test]
    fn the_parts_come_in_the_order_fingerprints_hash() {
        let transport = stdio();
        let parts: Vec<LaunchPart<'_>> = launch_of(&transport).parts().collect();
        assert_eq!(
            parts,
            [
                LaunchPart::Command("npx"),
                LaunchPart::Arg("-y"),
                LaunchPart::Arg("pkg"),
                LaunchPart::Env {
                    name: "A",
                    value: "${env:A}"
                },
                LaunchPart::Env {
                    name: "B",
                    value: "2"
                },
                LaunchPart::WorkingDir(Path::new("/srv")),
            ]
        );
    }

    #[test]
    fn map_env_replaces_values_and_keeps_the_rest_or_stops_at_an_error() {
        let transport = stdio();
        let launch = launch_of(&transport);
        let resolved = launch
            .map_env(|name, value| Ok::<_, String>(format!("{name}={value}")))
            .unwrap();
        let Transport::Stdio { env, .. } = &resolved else {
            panic!("not stdio");
        };
        assert_eq!(env["A"], "A=${env:A}");
        assert_eq!(env["B"], "B=2");
        assert_eq!(launch_of(&resolved).args, launch.args);
        assert_eq!(launch_of(&resolved).working_dir, launch.working_dir);
        let failed = launch.map_env(|name, _| Err::<String, _>(format!("no {name}")));
        assert_eq!(failed.err().as_deref(), Some("no A"));
    }
}
