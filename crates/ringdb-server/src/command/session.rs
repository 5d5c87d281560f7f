//! Commands on the connection and the server: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET,
//! CLIENT, COMMAND, CONFIG, TIME, LASTSAVE, SHUTDOWN, FUNCTION and SCRIPT (a server without
//! either), MULTI, DISCARD and UNWATCH (EXEC and WATCH run in the executor), and the refusals
//! of what the server does not do (pub/sub).

use super::table::known_commands;
use super::{errors, Reply};
use crate::shared::ServerShared;

/// What a connection carries between its requests.
#[derive(Debug)]
pub struct Session {
    /// The client's id (`CLIENT ID`).
    pub id: u64,
    /// Replies in RESP3 (`HELLO 3`).
    pub resp3: bool,
    /// Passed AUTH, or no password is set.
    pub authenticated: bool,
    /// `CLIENT SETNAME`.
    pub name: Option<String>,
    /// `CLIENT SETINFO LIB-NAME` and `LIB-VER`.
    pub library: (String, String),
    /// Inside MULTI: the queued requests.
    pub queued: Option<Vec<Vec<Vec<u8>>>>,
    /// A command queued in MULTI was refused: EXEC aborts.
    pub queue_failed: bool,
    /// WATCH: the keys whose writes make EXEC abort (`watch.rs`).
    pub watching: Option<crate::watch::Watching>,
    /// The peer's address, for `CLIENT LIST`.
    pub peer: String,
    /// SCAN cursors handed out: the cursor and the last key it returned.
    pub scan_cursors: Vec<(u64, Vec<u8>)>,
    /// The last SCAN cursor handed out.
    pub last_scan_cursor: u64,
    /// `CLUSTERX BYPASS`: the connection of a slot migration, which writes and reads slots
    /// whatever node serves them.
    pub bypass_slots: bool,
    /// `READONLY`: on a replica in cluster mode, reads of its primary's slots are served
    /// here instead of redirected.
    pub readonly: bool,
}

impl Session {
    /// A new connection's session.
    pub fn new(id: u64, needs_auth: bool, peer: String) -> Session {
        Session {
            id,
            resp3: false,
            authenticated: !needs_auth,
            name: None,
            library: (String::new(), String::new()),
            queued: None,
            queue_failed: false,
            watching: None,
            peer,
            scan_cursors: Vec::new(),
            last_scan_cursor: 0,
            bypass_slots: false,
            readonly: false,
        }
    }

    /// A new SCAN cursor (never 0, which means the start and the end).
    pub fn next_scan_cursor(&mut self) -> u64 {
        self.last_scan_cursor += 1;
        self.last_scan_cursor
    }
}

/// What a session command asks of the connection besides its reply.
#[derive(Debug, PartialEq)]
pub enum After {
    /// Nothing.
    Continue,
    /// Send the reply, then close (QUIT).
    Close,
    /// Stop the server (SHUTDOWN).
    Shutdown,
    /// Run the queued requests (EXEC).
    Exec(Vec<Vec<Vec<u8>>>),
}

fn upper(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_ascii_uppercase()
}

/// Runs a session command (its arity already checked).
pub fn run_session(
    session: &mut Session,
    arguments: &[Vec<u8>],
    shared: &ServerShared,
) -> (Reply, After) {
    let name = upper(&arguments[0]);
    let reply = match name.as_str() {
        "PING" => ping(session, arguments),
        "ECHO" => Reply::Bulk(arguments[1].clone()),
        "HELLO" | "RESET" | "CLIENT" => return self_describing(session, &name, arguments, shared),
        "AUTH" => auth(session, arguments, shared),
        "SELECT" => match super::parse_integer(&arguments[1]) {
            Some(0) => Reply::Ok,
            Some(_) => Reply::error("ERR DB index is out of range"),
            None => Reply::error(errors::NOT_INTEGER),
        },
        "QUIT" => return (Reply::Ok, After::Close),
        "COMMAND" => command(arguments),
        "CONFIG" => config(arguments, shared),
        "TIME" => {
            let micros = crate::value::now_ms() as u128 * 1000;
            Reply::Array(vec![
                Reply::Bulk((micros / 1_000_000).to_string().into_bytes()),
                Reply::Bulk((micros % 1_000_000).to_string().into_bytes()),
            ])
        }
        "LASTSAVE" => Reply::Integer(shared.last_save_secs() as i64),
        "SHUTDOWN" => return (Reply::Ok, After::Shutdown),
        "FUNCTION" | "SCRIPT" => nothing_scripted(&name, arguments),
        "MULTI" if session.queued.is_some() => Reply::error("ERR MULTI calls can not be nested"),
        "MULTI" => {
            session.queued = Some(Vec::new());
            session.queue_failed = false;
            Reply::Ok
        }
        "EXEC" | "DISCARD" => return exec_or_discard(session, &name),
        "UNWATCH" => {
            session.watching = None;
            Reply::Ok
        }
        "CLUSTER" => crate::cluster::cluster_command(arguments, shared),
        "CLUSTERX" => crate::cluster::clusterx_command(session, arguments, shared),
        // No slot migrates yet (so no -ASK is sent) and there are no replicas: accepted.
        "READONLY" => {
            session.readonly = true;
            Reply::Ok
        }
        "READWRITE" => {
            session.readonly = false;
            Reply::Ok
        }
        "ASKING" => Reply::Ok,
        "WATCH" => Reply::error("ERR WATCH runs in the executor"),
        _ => Reply::error(format!(
            "ERR '{}' is not supported: ringdb serve has no pub/sub",
            name.to_ascii_lowercase()
        )),
    };
    (reply, After::Continue)
}

/// HELLO, RESET and CLIENT: what they change of the connection (its protocol, name,
/// library) is copied to the server's table of clients once they ran.
fn self_describing(
    session: &mut Session,
    name: &str,
    arguments: &[Vec<u8>],
    shared: &ServerShared,
) -> (Reply, After) {
    let (reply, after) = match name {
        "HELLO" => (hello(session, arguments, shared), After::Continue),
        "RESET" => {
            let needs_auth = shared.password().is_some();
            *session = Session::new(session.id, needs_auth, session.peer.clone());
            (Reply::Simple("RESET".into()), After::Continue)
        }
        _ => client(session, arguments, shared),
    };
    shared.client_table.describe(session.id, described(session));
    (reply, after)
}

fn exec_or_discard(session: &mut Session, name: &str) -> (Reply, After) {
    let Some(queued) = session.queued.take() else {
        let text = format!("ERR {name} without MULTI");
        return (Reply::Error(text), After::Continue);
    };
    let failed = std::mem::take(&mut session.queue_failed);
    if name == "DISCARD" || failed {
        session.watching = None;
    }
    match (name, failed) {
        ("DISCARD", _) => (Reply::Ok, After::Continue),
        (_, true) => (
            Reply::error("EXECABORT Transaction discarded because of previous errors."),
            After::Continue,
        ),
        _ => (Reply::Ok, After::Exec(queued)),
    }
}

fn ping(session: &Session, arguments: &[Vec<u8>]) -> Reply {
    match arguments.len() {
        1 if session.queued.is_none() => Reply::Simple("PONG".into()),
        1 => Reply::Bulk(b"PONG".to_vec()),
        2 => Reply::Bulk(arguments[1].clone()),
        _ => Reply::error(errors::arity("ping")),
    }
}

/// `AUTH [username] password` (the only user is `default`).
fn auth(session: &mut Session, arguments: &[Vec<u8>], shared: &ServerShared) -> Reply {
    let (user, password) = match arguments.len() {
        2 => (&b"default"[..], &arguments[1]),
        3 => (&arguments[1][..], &arguments[2]),
        _ => return Reply::error(errors::SYNTAX),
    };
    match shared.password() {
        None => Reply::error(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ),
        Some(expected) if user == b"default" && password.as_slice() == expected.as_bytes() => {
            session.authenticated = true;
            Reply::Ok
        }
        Some(_) => Reply::error(errors::WRONG_PASS),
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
fn hello(session: &mut Session, arguments: &[Vec<u8>], shared: &ServerShared) -> Reply {
    let mut version = if session.resp3 { 3 } else { 2 };
    let mut at = 1;
    if let Some(requested) = arguments.get(1) {
        match super::parse_integer(requested) {
            Some(v @ (2 | 3)) => version = v,
            Some(_) => return Reply::error("NOPROTO unsupported protocol version"),
            None => return Reply::error("ERR Protocol version is not an integer or out of range"),
        }
        at = 2;
    }
    while at < arguments.len() {
        match upper(&arguments[at]).as_str() {
            "AUTH" if at + 2 < arguments.len() => {
                let words = [
                    b"AUTH".to_vec(),
                    arguments[at + 1].clone(),
                    arguments[at + 2].clone(),
                ];
                if let Reply::Error(text) = auth(session, &words, shared) {
                    return Reply::Error(text);
                }
                at += 3;
            }
            "SETNAME" if at + 1 < arguments.len() => {
                session.name = Some(String::from_utf8_lossy(&arguments[at + 1]).into_owned());
                at += 2;
            }
            _ => return Reply::error(errors::SYNTAX),
        }
    }
    if !session.authenticated {
        return Reply::error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    session.resp3 = version == 3;
    let field = |name: &str, value: Reply| (Reply::Bulk(name.as_bytes().to_vec()), value);
    Reply::Map(vec![
        field("server", Reply::Bulk(b"redis".to_vec())),
        field(
            "version",
            Reply::Bulk(crate::REDIS_VERSION.as_bytes().to_vec()),
        ),
        field("proto", Reply::Integer(version)),
        field("id", Reply::Integer(session.id as i64)),
        field("mode", Reply::Bulk(b"standalone".to_vec())),
        field("role", Reply::Bulk(b"master".to_vec())),
        field("modules", Reply::Array(Vec::new())),
    ])
}

/// What the connection's entry in the server's table of clients shows of its session.
fn described(session: &Session) -> crate::clients::Described {
    crate::clients::Described {
        name: session.name.clone().unwrap_or_default(),
        library_name: session.library.0.clone(),
        library_version: session.library.1.clone(),
        resp: if session.resp3 { 3 } else { 2 },
    }
}

fn client(session: &mut Session, arguments: &[Vec<u8>], shared: &ServerShared) -> (Reply, After) {
    let sub = upper(&arguments[1]);
    let reply = match (sub.as_str(), arguments.len()) {
        ("ID", 2) => Reply::Integer(session.id as i64),
        ("GETNAME", 2) => session
            .name
            .clone()
            .map_or(Reply::Null, |name| Reply::Bulk(name.into_bytes())),
        ("SETNAME", 3) => client_set_name(session, &arguments[2]),
        ("SETINFO", 4) => client_set_info(session, &arguments[2], &arguments[3]),
        ("INFO", 2) => Reply::Verbatim(client_line(session, shared) + "\n"),
        ("LIST", _) => client_list(session, &arguments[2..], shared),
        ("KILL", _) => return client_kill(session, &arguments[2..], shared),
        ("NO-EVICT" | "NO-TOUCH", 3) => Reply::Ok,
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(&arguments[1])
        )),
    };
    (reply, After::Continue)
}

/// `CLIENT SETNAME name` (empty: no name).
fn client_set_name(session: &mut Session, name: &[u8]) -> Reply {
    let name = String::from_utf8_lossy(name).into_owned();
    if name.contains(' ') || name.contains('\n') {
        return Reply::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        );
    }
    session.name = (!name.is_empty()).then_some(name);
    Reply::Ok
}

/// `CLIENT SETINFO LIB-NAME|LIB-VER value`.
fn client_set_info(session: &mut Session, option: &[u8], value: &[u8]) -> Reply {
    let value = String::from_utf8_lossy(value).into_owned();
    match upper(option).as_str() {
        "LIB-NAME" => session.library.0 = value,
        "LIB-VER" => session.library.1 = value,
        _ => {
            return Reply::error(format!(
                "ERR Unrecognized option '{}'",
                String::from_utf8_lossy(option)
            ))
        }
    }
    Reply::Ok
}

/// `CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...]`: every connection of the
/// server (all are of type normal: replicas and pub/sub are not clients of this table).
fn client_list(session: &Session, options: &[Vec<u8>], shared: &ServerShared) -> Reply {
    let mut wanted: Option<Vec<u64>> = None;
    let mut at = 0;
    while at < options.len() {
        match (upper(&options[at]).as_str(), options.get(at + 1)) {
            ("TYPE", Some(kind)) => {
                match upper(kind).as_str() {
                    "NORMAL" => {}
                    "MASTER" | "REPLICA" | "SLAVE" | "PUBSUB" => wanted = Some(Vec::new()),
                    _ => {
                        return Reply::error(format!(
                            "ERR Unknown client type '{}'",
                            String::from_utf8_lossy(kind)
                        ))
                    }
                }
                at += 2;
            }
            ("ID", Some(_)) => {
                let mut ids = Vec::new();
                for id in &options[at + 1..] {
                    match super::parse_integer(id).and_then(|id| u64::try_from(id).ok()) {
                        Some(id) if id > 0 => ids.push(id),
                        _ => return Reply::error("ERR Invalid client ID"),
                    }
                }
                wanted = Some(ids);
                at = options.len();
            }
            _ => return Reply::error(errors::SYNTAX),
        }
    }
    let own = client_line(session, shared);
    Reply::Verbatim(
        shared
            .client_table
            .lines(wanted.as_deref(), (session.id, &own)),
    )
}

/// `CLIENT KILL addr:port` (the old form: OK or an error) or `CLIENT KILL <filter value>
/// ...` (ID, ADDR, LADDR, USER, SKIPME, MAXAGE, TYPE normal: the count ended). A connection
/// that kills itself (`SKIPME no`) gets its reply, then closes.
fn client_kill(session: &Session, options: &[Vec<u8>], shared: &ServerShared) -> (Reply, After) {
    let old_form = options.len() == 1;
    let filter = match old_form {
        true => Ok(crate::clients::KillFilter {
            peer: Some(String::from_utf8_lossy(&options[0]).into_owned()),
            user_matches: true,
            ..Default::default()
        }),
        false => kill_filter(session, options),
    };
    let filter = match filter {
        Ok(filter) => filter,
        Err(reply) => return (reply, After::Continue),
    };
    let (killed, itself) = shared.client_table.kill(&filter, session.id);
    let after = if itself {
        After::Close
    } else {
        After::Continue
    };
    let count = killed + usize::from(itself);
    match old_form {
        true if count == 0 => (Reply::error("ERR No such client"), after),
        true => (Reply::Ok, after),
        false => (Reply::Integer(count as i64), after),
    }
}

fn kill_filter(
    session: &Session,
    options: &[Vec<u8>],
) -> Result<crate::clients::KillFilter, Reply> {
    let mut filter = crate::clients::KillFilter {
        user_matches: true,
        skip: Some(session.id),
        ..Default::default()
    };
    if options.is_empty() || !options.len().is_multiple_of(2) {
        return Err(Reply::error(errors::SYNTAX));
    }
    for pair in options.chunks_exact(2) {
        let value = String::from_utf8_lossy(&pair[1]).into_owned();
        let number = || value.parse::<u64>().ok();
        match upper(&pair[0]).as_str() {
            "ID" => {
                filter.id =
                    Some(number().ok_or(Reply::error("ERR client-id should be greater than 0"))?)
            }
            "ADDR" => filter.peer = Some(value),
            "LADDR" => filter.local = Some(value),
            "USER" => filter.user_matches = value == "default",
            "MAXAGE" => {
                filter.max_age_secs = Some(number().ok_or(Reply::error(errors::NOT_INTEGER))?)
            }
            "SKIPME" => match value.to_ascii_lowercase().as_str() {
                "yes" => filter.skip = Some(session.id),
                "no" => filter.skip = None,
                _ => return Err(Reply::error(errors::SYNTAX)),
            },
            "TYPE" => match value.to_ascii_lowercase().as_str() {
                "normal" => {}
                "master" | "replica" | "slave" | "pubsub" => filter.user_matches = false,
                _ => return Err(Reply::error(format!("ERR Unknown client type '{value}'"))),
            },
            _ => return Err(Reply::error(errors::SYNTAX)),
        }
    }
    Ok(filter)
}

fn client_line(session: &Session, shared: &ServerShared) -> String {
    format!(
        "id={} addr={} laddr={} fd=0 name={} age=0 idle=0 flags={} db=0 sub=0 psub=0 ssub=0 multi={} qbuf=0 user=default resp={} lib-name={} lib-ver={}",
        session.id,
        session.peer,
        shared.client_table.local_address(session.id),
        session.name.as_deref().unwrap_or(""),
        if session.queued.is_some() { "x" } else { "N" },
        session.queued.as_ref().map_or(-1, |q| q.len() as i64),
        if session.resp3 { 3 } else { 2 },
        session.library.0,
        session.library.1,
    )
}

/// A command as `COMMAND` describes it: name, arity, flags, first key, last key, step, ACL
/// categories (cluster clients find a command's keys by the positions).
fn command_info(name: &str, arity: i32) -> Reply {
    let (first, last, step) = super::table::key_positions(name);
    let flags = match (first, super::table::writes(name)) {
        (_, true) => vec![Reply::Simple("write".into())],
        (0, false) => Vec::new(),
        (_, false) => vec![Reply::Simple("readonly".into())],
    };
    Reply::Array(vec![
        Reply::Bulk(name.to_ascii_lowercase().into_bytes()),
        Reply::Integer(i64::from(arity)),
        Reply::Set(flags),
        Reply::Integer(first),
        Reply::Integer(last),
        Reply::Integer(step),
        Reply::Set(Vec::new()),
    ])
}

fn command(arguments: &[Vec<u8>]) -> Reply {
    let known = known_commands();
    let sub = arguments.get(1).map(|s| upper(s));
    match sub.as_deref() {
        None => Reply::Array(known.iter().map(|(n, a)| command_info(n, *a)).collect()),
        Some("COUNT") => Reply::Integer(known.len() as i64),
        Some("INFO") => Reply::Array(
            arguments[2..]
                .iter()
                .map(|name| {
                    let name = upper(name);
                    known
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map_or(Reply::NullArray, |(n, a)| command_info(n, *a))
                })
                .collect(),
        ),
        Some("DOCS") => Reply::Map(Vec::new()),
        Some("GETKEYS") if arguments.len() >= 3 => command_keys(&known, &arguments[2..]),
        Some("LIST") => Reply::Array(
            known
                .iter()
                .map(|(n, _)| Reply::Bulk(n.to_ascii_lowercase().into_bytes()))
                .collect(),
        ),
        Some(_) => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(&arguments[1])
        )),
    }
}

/// `COMMAND GETKEYS name argument ...`: the keys of a command as its key positions name them.
fn command_keys(known: &[(&'static str, i32)], request: &[Vec<u8>]) -> Reply {
    let name = upper(&request[0]);
    let Some((_, arity)) = known.iter().find(|(n, _)| *n == name) else {
        return Reply::error("ERR Invalid command specified");
    };
    let count = request.len() as i64;
    let arity = i64::from(*arity);
    if (arity > 0 && count != arity) || (arity < 0 && count < -arity) {
        return Reply::error("ERR Invalid number of arguments specified for command");
    }
    let (first, last, step) = super::table::key_positions(&name);
    if first == 0 || step <= 0 {
        return Reply::error("ERR The command has no key arguments");
    }
    let last = if last < 0 {
        count + last
    } else {
        last.min(count - 1)
    };
    let keys = (first..=last)
        .step_by(step as usize)
        .map(|at| Reply::Bulk(request[at as usize].clone()))
        .collect();
    Reply::Array(keys)
}

/// `CONFIG GET pattern ...` over the settings that exist, `CONFIG SET` of those that can
/// change, `CONFIG RESETSTAT`.
fn config(arguments: &[Vec<u8>], shared: &ServerShared) -> Reply {
    match upper(&arguments[1]).as_str() {
        "GET" if arguments.len() >= 3 => {
            let settings = shared.settings();
            let mut pairs = Vec::new();
            for pattern in &arguments[2..] {
                for (name, value) in &settings {
                    if crate::glob::matches(&pattern.to_ascii_lowercase(), name.as_bytes())
                        && !pairs.iter().any(|(n, _): &(Reply, Reply)| {
                            *n == Reply::Bulk(name.as_bytes().to_vec())
                        })
                    {
                        pairs.push((
                            Reply::Bulk(name.as_bytes().to_vec()),
                            Reply::Bulk(value.clone().into_bytes()),
                        ));
                    }
                }
            }
            Reply::Map(pairs)
        }
        "SET" if arguments.len() >= 4 && arguments.len().is_multiple_of(2) => {
            for pair in arguments[2..].chunks_exact(2) {
                if let Err(text) = shared.set_setting(&pair[0], &pair[1]) {
                    return Reply::Error(text);
                }
            }
            Reply::Ok
        }
        "RESETSTAT" => {
            shared.reset_statistics();
            Reply::Ok
        }
        "GET" | "SET" => Reply::error(errors::arity("config|get")),
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(&arguments[1])
        )),
    }
}

/// FUNCTION and SCRIPT as a server that has no scripts (clients and test suites send them).
fn nothing_scripted(name: &str, arguments: &[Vec<u8>]) -> Reply {
    match (name, upper(&arguments[1]).as_str()) {
        ("FUNCTION", "LIST") => Reply::Array(Vec::new()),
        (_, "FLUSH") => Reply::Ok,
        ("SCRIPT", "EXISTS") => {
            Reply::Array(arguments[2..].iter().map(|_| Reply::Integer(0)).collect())
        }
        _ => Reply::error(format!(
            "ERR {} {} is not supported: ringdb serve runs no scripts",
            name.to_ascii_lowercase(),
            String::from_utf8_lossy(&arguments[1]).to_ascii_lowercase()
        )),
    }
}
