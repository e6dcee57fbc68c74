//! A chain's program stage: the plan request as JSON on its stdin, the
//! verdict in its exit status, the feedback on its stderr. The program leads
//! a session of its own ([`crate::group::Session`]): at its timeout, when it
//! ends, and when the lead stops, every process in it is killed, so nothing
//! it left in the background outlives it.

use std::{process::Stdio, time::Duration};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt},
    process::ChildStdin,
    sync::oneshot,
};

use super::Verdict;
use crate::group::Session;

/// The most bytes of a program's stderr kept as feedback.
const MAX_STDERR: usize = mesh_core::limits::REASON;

/// How a program ran: its exit status and what it said (stderr; for a
/// result's program, stdout then stderr), or why it did not end: it could
/// not start, or the timeout passed (it is killed).
async fn run(
    command: &[String],
    timeout: Duration,
    input: &str,
    dir: Option<&std::path::Path>,
    with_stdout: bool,
) -> Result<(std::process::ExitStatus, String), String> {
    let Some((program, args)) = command.split_first() else {
        return Err("no command".into());
    };
    let mut spawn = tokio::process::Command::new(program);
    spawn
        .args(args)
        .stdin(Stdio::piped())
        .stdout(if with_stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::piped());
    if let Some(dir) = dir {
        spawn.current_dir(dir);
    }
    let mut stage =
        Session::spawn(&mut spawn).map_err(|e| format!("cannot start {program}: {e}"))?;
    let deadline = tokio::time::Instant::now() + timeout;
    let stdin = stage.child.stdin.take();
    // Read while it runs, so that it never blocks on a full pipe.
    let mut readers = Vec::new();
    let mut stops = Vec::new();
    if let Some(out) = stage.child.stdout.take() {
        let (stop, stopped) = oneshot::channel();
        stops.push(stop);
        readers.push(tokio::spawn(collect(out, stopped)));
    }
    if let Some(err) = stage.child.stderr.take() {
        let (stop, stopped) = oneshot::channel();
        stops.push(stop);
        readers.push(tokio::spawn(collect(err, stopped)));
    }
    let ended = tokio::time::timeout_at(deadline, async {
        let feed = feed(stdin, input);
        tokio::pin!(feed);
        let mut fed = false;
        loop {
            tokio::select! {
                status = stage.child.wait() => break status,
                () = &mut feed, if !fed => fed = true,
            }
        }
    })
    .await;
    // At the timeout, or when it ended: whatever it left behind goes too.
    stage.kill();
    // Its pipes end once every process holding them is gone; what came by
    // the deadline is kept.
    let mut said = Vec::new();
    for mut reader in readers {
        let got = match tokio::time::timeout_at(deadline, &mut reader).await {
            Ok(got) => got.unwrap_or_default(),
            Err(_) => {
                for stop in stops.drain(..) {
                    let _ = stop.send(());
                }
                reader.await.unwrap_or_default()
            }
        };
        said.extend(got);
    }
    let said = String::from_utf8_lossy(&said).trim().to_owned();
    match ended {
        Err(_) => Err(format!(
            "no verdict within {}s; the program was killed",
            timeout.as_secs()
        )),
        Ok(Err(e)) => Err(format!("{program}: {e}")),
        Ok(Ok(status)) => Ok((status, said)),
    }
}

/// Runs a program stage: `input` on its stdin; exit 0 approves, 2 rejects
/// with its stderr as the feedback, 1 passes; any other end, or no end
/// within `timeout` (it is killed), is an error.
pub async fn run_program(command: &[String], timeout: Duration, input: &str) -> Verdict {
    let error = |words: String| Verdict::Error { words };
    let (status, said) = match run(command, timeout, input, None, false).await {
        Ok(ran) => ran,
        Err(why) => return error(why),
    };
    match status.code() {
        Some(0) => Verdict::Approve {
            grant: None,
            words: said,
        },
        Some(2) if said.is_empty() => {
            error("rejected (exit 2) without saying why on stderr".into())
        }
        Some(2) => Verdict::Reject { words: said },
        Some(1) => Verdict::Pass { words: said },
        Some(code) => error(format!("exit status {code}: {said}")),
        None => error(format!("ended by a signal ({status})")),
    }
}

/// Runs a result's program stage in `dir` (a scratch worktree of the
/// result's commit): `input` on its stdin; exit 0 approves, any other exit
/// rejects with its output (stdout, then stderr) as the feedback; no end
/// within `timeout` (it is killed), or no start, is an error.
pub(crate) async fn run_result_program(
    command: &[String],
    timeout: Duration,
    input: &str,
    dir: &std::path::Path,
) -> Verdict {
    let (status, said) = match run(command, timeout, input, Some(dir), true).await {
        Ok(ran) => ran,
        Err(words) => return Verdict::Error { words },
    };
    match status.code() {
        Some(0) => Verdict::Approve {
            grant: None,
            words: if said.is_empty() {
                "passed".into()
            } else {
                mesh_core::limits::cut(&said, 2000)
            },
        },
        Some(code) => Verdict::Reject {
            words: format!("failed (exit status {code}): {said}"),
        },
        None => Verdict::Reject {
            words: format!("ended by a signal ({status}): {said}"),
        },
    }
}

/// Writes `input` to the program and closes its stdin; a program that does
/// not read its input is its own business.
async fn feed(stdin: Option<ChildStdin>, input: &str) {
    if let Some(mut stdin) = stdin {
        let _ = stdin.write_all(input.as_bytes()).await;
    }
}

/// Reads `from` to its end, or until told to stop; keeps the first
/// [`MAX_STDERR`] bytes and drains the rest.
async fn collect(mut from: impl AsyncRead + Unpin, mut stop: oneshot::Receiver<()>) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        tokio::select! {
            _ = &mut stop => break,
            read = from.read(&mut chunk) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = MAX_STDERR.saturating_sub(kept.len());
                    kept.extend_from_slice(&chunk[..n.min(room)]);
                }
            },
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_program_decides_by_its_exit_status() {
        let sh = |script: &str| vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
        let second = Duration::from_secs(5);
        let approve = run_program(&sh("cat >/dev/null; exit 0"), second, "{}").await;
        assert!(matches!(approve, Verdict::Approve { .. }), "{approve:?}");
        let reject = run_program(&sh("echo 'add tests' >&2; exit 2"), second, "{}").await;
        assert_eq!(
            reject,
            Verdict::Reject {
                words: "add tests".into()
            }
        );
        let pass = run_program(&sh("exit 1"), second, "{}").await;
        assert!(matches!(pass, Verdict::Pass { .. }));
        let crash = run_program(&sh("echo boom >&2; exit 3"), second, "{}").await;
        assert_eq!(
            crash,
            Verdict::Error {
                words: "exit status 3: boom".into()
            }
        );
        let silent = run_program(&sh("exit 2"), second, "{}").await;
        assert!(matches!(silent, Verdict::Error { .. }));
        let input = run_program(&sh("grep -q '\"plan\"' || exit 3"), second, "{\"plan\":{}}").await;
        assert!(matches!(input, Verdict::Approve { .. }), "{input:?}");
        let missing = run_program(&["/no/such/program".to_owned()], second, "{}").await;
        assert!(matches!(missing, Verdict::Error { words } if words.contains("cannot start")));
        // A background process holding stderr does not hold the verdict back.
        let left = run_program(&sh("echo why >&2; ( sleep 30 & ); exit 2"), second, "{}").await;
        assert_eq!(
            left,
            Verdict::Reject {
                words: "why".into()
            }
        );
        // Much more on stderr than is kept, and input it never reads.
        let loud = run_program(
            &sh("head -c 1000000 /dev/zero | tr '\\0' x >&2; exit 1"),
            second,
            &"y".repeat(1 << 20),
        )
        .await;
        assert!(
            matches!(&loud, Verdict::Pass { words } if words.len() == MAX_STDERR),
            "{loud:?}"
        );
    }

    #[tokio::test]
    async fn a_hanging_program_is_killed_at_its_timeout_and_never_approves() {
        let hang = vec!["sleep".to_owned(), "30".to_owned()];
        let started = std::time::Instant::now();
        let verdict = run_program(&hang, Duration::from_secs(1), "{}").await;
        assert!(matches!(verdict, Verdict::Error { words } if words.contains("within 1s")));
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
