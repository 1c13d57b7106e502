//! A fault-injecting HTTP proxy in front of moto: the functions' AWS clients point at it
//! (their endpoint URL), and it answers chosen calls with a throttle or a 5xx instead of
//! passing them on.
//!
//! A call is named by its service and action, read from the request alone:
//! `X-Amz-Target` for the JSON services (`AWSGlue.UpdateTable`,
//! `DynamoDB_20120810.PutItem`, `AmazonSQS.SendMessage`), the method for S3 (`S3.PUT`
//! uploads an object, `S3.GET` reads one). Rules say which calls fail and how ("the next
//! 3 `AWSGlue.UpdateTable` → 500", "every 5th `S3.PUT` → 503 SlowDown", "the next
//! `AWSGlue.UpdateTable` takes effect but its answer is a 500"). A hook may also see each
//! matching call's request line before it passes (a test's process killing itself at a
//! chosen upload). Every request
//! is one connection: the proxy asks moto to close after its answer and passes the bytes
//! through untouched, so what the SDK sees is moto's answer or the injected one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How an injected failure answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The service's throttle: `ThrottlingException` (400) for the JSON services,
    /// `SlowDown` (503) for S3.
    Throttle,
    /// An internal error: 500 (`InternalFailure`, S3's `InternalError`).
    ServerError,
    /// The call reaches moto and takes effect, but its answer is lost: the client gets
    /// [`Fault::ServerError`]'s (a timeout or a 500 after AWS acted).
    AnswerLost,
}

/// Which matching calls fail: the next `count` (`every` = 1), or every `every`-th.
#[derive(Debug, Clone)]
struct Rule {
    call: String,
    fault: Fault,
    every: u32,
    left: Option<u32>,
    seen: u32,
}

/// The proxy's rules and what it saw; the proxy serves until the test process ends.
#[derive(Clone)]
pub struct FaultProxy {
    pub endpoint: String,
    rules: Arc<Mutex<Vec<Rule>>>,
    /// Per call: (requests seen, failures injected).
    counts: Arc<Mutex<HashMap<String, (u32, u32)>>>,
    /// Per call: what runs on its request line before the call passes or fails.
    hooks: Arc<Mutex<Vec<(String, Hook)>>>,
}

/// What [`FaultProxy::before`] runs on a call's request line (`PUT /bucket/key HTTP/1.1`).
type Hook = Arc<dyn Fn(&str) + Send + Sync>;

impl FaultProxy {
    /// A proxy on a free 127.0.0.1 port in front of `upstream` (`http://host:port`).
    pub async fn start(upstream: &str) -> FaultProxy {
        let upstream = upstream.trim_start_matches("http://").trim_end_matches('/').to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = FaultProxy {
            endpoint: format!("http://{}", listener.local_addr().unwrap()),
            rules: Arc::default(),
            counts: Arc::default(),
            hooks: Arc::default(),
        };
        let serving = proxy.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (proxy, upstream) = (serving.clone(), upstream.clone());
                tokio::spawn(async move { proxy.serve(client, &upstream).await });
            }
        });
        proxy
    }

    /// The next `count` calls named `call` fail with `fault`.
    pub fn fail_next(&self, count: u32, call: &str, fault: Fault) {
        self.add(Rule { call: call.into(), fault, every: 1, left: Some(count), seen: 0 });
    }

    /// Every `every`-th call named `call` fails with `fault`, until [`Self::clear`].
    pub fn fail_every(&self, every: u32, call: &str, fault: Fault) {
        self.add(Rule { call: call.into(), fault, every, left: None, seen: 0 });
    }

    /// `hook` runs on the request line of every call named `call`, before the call goes on.
    pub fn before(&self, call: &str, hook: impl Fn(&str) + Send + Sync + 'static) {
        self.hooks.lock().unwrap().push((call.into(), Arc::new(hook)));
    }

    /// Every call passes from now on.
    pub fn clear(&self) {
        self.rules.lock().unwrap().clear();
    }

    /// How many `call`s failed by a rule so far.
    pub fn injected(&self, call: &str) -> u32 {
        self.counts.lock().unwrap().get(call).map_or(0, |c| c.1)
    }

    /// How many `call`s came through the proxy so far, failed or not.
    pub fn seen(&self, call: &str) -> u32 {
        self.counts.lock().unwrap().get(call).map_or(0, |c| c.0)
    }

    fn add(&self, rule: Rule) {
        self.rules.lock().unwrap().push(rule);
    }

    /// The fault the rules give this call, counting it.
    fn decide(&self, call: &str) -> Option<Fault> {
        let mut fault = None;
        for rule in self.rules.lock().unwrap().iter_mut().filter(|r| r.call == call && r.left != Some(0)) {
            rule.seen += 1;
            if fault.is_none() && rule.seen.is_multiple_of(rule.every) {
                fault = Some(rule.fault);
                rule.left = rule.left.map(|n| n - 1);
            }
        }
        let mut counts = self.counts.lock().unwrap();
        let count = counts.entry(call.to_string()).or_default();
        count.0 += 1;
        count.1 += u32::from(fault.is_some());
        fault
    }

    async fn serve(&self, mut client: TcpStream, upstream: &str) {
        let Some((head, rest)) = read_head(&mut client).await else { return };
        let call = call_name(&head);
        let hooks: Vec<Hook> =
            self.hooks.lock().unwrap().iter().filter(|(c, _)| *c == call).map(|(_, h)| h.clone()).collect();
        for hook in hooks {
            hook(head.lines().next().unwrap_or_default());
        }
        let Some(fault) = self.decide(&call) else {
            let Ok(mut server) = TcpStream::connect(upstream).await else { return };
            let sent = server.write_all(close_after(&head).as_bytes()).await.and(server.write_all(&rest).await);
            if sent.is_ok() {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            }
            return;
        };
        // The body read first, so the client is not cut off while sending it.
        let length = header(&head, "content-length").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
        let Some(body) = read_to(&mut client, rest, length).await else { return };
        if fault == Fault::AnswerLost && pass_and_drop_answer(upstream, &head, &body).await.is_err() {
            return;
        }
        let _ = client.write_all(fault_response(&call, fault).as_bytes()).await;
        let _ = client.shutdown().await;
    }
}

/// `have` and then more of `stream` until `length` bytes.
async fn read_to(stream: &mut TcpStream, mut have: Vec<u8>, length: usize) -> Option<Vec<u8>> {
    let mut chunk = [0u8; 16 * 1024];
    while have.len() < length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => have.extend_from_slice(&chunk[..n]),
        }
    }
    Some(have)
}

/// Sends the request to moto and reads its whole answer, which nobody gets.
async fn pass_and_drop_answer(upstream: &str, head: &str, body: &[u8]) -> std::io::Result<()> {
    let mut server = TcpStream::connect(upstream).await?;
    server.write_all(close_after(head).as_bytes()).await?;
    server.write_all(body).await?;
    server.read_to_end(&mut Vec::new()).await.map(drop)
}

/// The request head (up to its blank line) and the body bytes read with it.
async fn read_head(client: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end + 4]).to_string();
            return Some((head, buf[end + 4..].to_vec()));
        }
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// `AWSGlue.UpdateTable`, `DynamoDB_20120810.PutItem`, `AmazonSQS.SendMessage`, or
/// `S3.<method>` for the REST calls.
fn call_name(head: &str) -> String {
    match header(head, "x-amz-target") {
        Some(target) => target.to_string(),
        None => format!("S3.{}", head.split_whitespace().next().unwrap_or_default()),
    }
}

/// The head with `Connection: close`: moto closes after its answer, which ends the copy.
fn close_after(head: &str) -> String {
    let mut lines: Vec<&str> =
        head.trim_end().lines().filter(|l| !l.to_ascii_lowercase().starts_with("connection:")).collect();
    lines.push("Connection: close");
    format!("{}\r\n\r\n", lines.join("\r\n"))
}

/// The answer AWS gives for `fault` on `call`.
fn fault_response(call: &str, fault: Fault) -> String {
    let (status, content_type, body) = if call.starts_with("S3.") {
        let (status, code) = match fault {
            Fault::Throttle => ("503 Slow Down", "SlowDown"),
            Fault::ServerError | Fault::AnswerLost => ("500 Internal Server Error", "InternalError"),
        };
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>injected by the fault proxy</Message><RequestId>fault</RequestId></Error>"
        );
        (status, "application/xml", body)
    } else {
        let (status, code) = match fault {
            Fault::Throttle => ("400 Bad Request", "ThrottlingException"),
            Fault::ServerError | Fault::AnswerLost => ("500 Internal Server Error", "InternalFailure"),
        };
        (
            status,
            "application/x-amz-json-1.1",
            format!(r#"{{"__type":"{code}","message":"injected by the fault proxy"}}"#),
        )
    };
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nx-amzn-requestid: fault\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_named_by_target_or_s3_method() {
        let glue = "POST / HTTP/1.1\r\nX-Amz-Target: AWSGlue.UpdateTable\r\n\r\n";
        assert_eq!(call_name(glue), "AWSGlue.UpdateTable");
        assert_eq!(call_name("PUT /b/k HTTP/1.1\r\nHost: x\r\n\r\n"), "S3.PUT");
        let closed = close_after("GET /b HTTP/1.1\r\nConnection: keep-alive\r\nHost: x\r\n\r\n");
        assert_eq!(closed, "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    }
}
