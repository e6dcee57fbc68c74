//! A member's life on the lead, as a pure state machine: no I/O and no clock
//! (an event that needs the time carries it). The lead derives the status
//! operators see ([`Lifecycle::status`]) from it and nothing else.
//!
//! ```text
//!  Join --> Joined --StreamOpened--> Working <--ShowedWork-- Idle
//!             |                        |  --ReportedIdle-->  |
//!             |                   StreamLost                StreamLost
//!             |                        v                      v
//!             |                   Disconnected (remembers idle; grace runs)
//!             |                        |  --StreamOpened--> Working | Idle
//!             +-----------+------------+
//!                         |
//!   any live state --ShutdownRequested--> ShuttingDown (remembers idle and
//!                                          whether connected; grace runs
//!                                          while disconnected)
//!   ShuttingDown --ShutdownSettled--> Working | Idle | Disconnected
//!   any live state --Terminate--> Terminated
//!   Joined | Disconnected | ShuttingDown (disconnected)
//!          --GraceLapsed{by >= grace end}--> Terminated
//!   Terminated: final; every event leaves it as it is.
//! ```

/// Where a member is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Joined; its inbox stream has not opened yet. The grace period runs.
    Joined {
        /// Reported idle already.
        idle: bool,
        /// When the grace period ends (unix ms).
        grace_until: i64,
    },
    /// Connected, and busy.
    Working,
    /// Connected, with nothing to do.
    Idle,
    /// Its stream ended; it may come back within the grace period.
    Disconnected {
        /// Whether it was idle (it is again on reconnecting).
        idle: bool,
        /// When the grace period ends (unix ms).
        grace_until: i64,
    },
    /// A shutdown request for it is pending.
    ShuttingDown {
        /// Whether it was idle.
        idle: bool,
        /// While disconnected: when the grace period ends; `None` connected.
        grace_until: Option<i64>,
    },
    /// Gone for good.
    Terminated {
        /// When (unix ms).
        at: i64,
    },
}

/// What happens to a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Its inbox stream opened (or a new one replaced the old).
    StreamOpened,
    /// Its inbox stream ended (closed, or ended by the lead as stuck); the
    /// grace period runs until `grace_until`.
    StreamLost {
        /// When the grace period ends (unix ms).
        grace_until: i64,
    },
    /// It reported idle.
    ReportedIdle,
    /// It made a call that shows work.
    ShowedWork,
    /// A shutdown request for it was opened.
    ShutdownRequested,
    /// No shutdown request for it is pending any more (refused, expired).
    ShutdownSettled,
    /// The grace periods ending by `by` (unix ms) are over.
    GraceLapsed {
        /// The time the grace periods are checked against.
        by: i64,
    },
    /// It left: agreed to shut down, called `Leave`, was stopped.
    Terminate {
        /// When (unix ms).
        at: i64,
    },
}

/// The status operators see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Working,
    Idle,
    Disconnected,
    ShuttingDown,
    Terminated,
}

/// A member's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifecycle {
    state: State,
}

impl Lifecycle {
    /// A member that just joined; its grace period ends at `grace_until`.
    pub fn joined(grace_until: i64) -> Self {
        Self {
            state: State::Joined {
                idle: false,
                grace_until,
            },
        }
    }

    /// A member as stored, after the lead restarted: disconnected until it
    /// comes back (by `grace_until`), or terminated (counted from `now`).
    pub fn restored(idle: bool, terminated: bool, now: i64, grace_until: i64) -> Self {
        let state = if terminated {
            State::Terminated { at: now }
        } else {
            State::Disconnected { idle, grace_until }
        };
        Self { state }
    }

    /// Where it is.
    pub fn state(&self) -> State {
        self.state
    }

    /// Takes in `event`; `true` if the state changed.
    pub fn on(&mut self, event: Event) -> bool {
        let next = next(self.state, event);
        let changed = next != self.state;
        self.state = next;
        changed
    }

    /// The status operators see.
    pub fn status(&self) -> Status {
        match self.state {
            State::Joined { .. } | State::Disconnected { .. } => Status::Disconnected,
            State::Working => Status::Working,
            State::Idle => Status::Idle,
            State::ShuttingDown { .. } => Status::ShuttingDown,
            State::Terminated { .. } => Status::Terminated,
        }
    }

    /// Whether it joined and its inbox stream has not opened yet.
    pub fn is_joining(&self) -> bool {
        matches!(self.state, State::Joined { .. })
    }

    /// Whether it left for good.
    pub fn is_terminated(&self) -> bool {
        matches!(self.state, State::Terminated { .. })
    }

    /// When it terminated.
    pub fn terminated_at(&self) -> Option<i64> {
        match self.state {
            State::Terminated { at } => Some(at),
            _ => None,
        }
    }

    /// Whether it said it has nothing to do (and showed no work since).
    pub fn is_idle(&self) -> bool {
        match self.state {
            State::Idle => true,
            State::Joined { idle, .. }
            | State::Disconnected { idle, .. }
            | State::ShuttingDown { idle, .. } => idle,
            State::Working | State::Terminated { .. } => false,
        }
    }

    /// Whether its grace period is over by `by`: [`Event::GraceLapsed`]
    /// would terminate it.
    pub fn lapses_by(&self, by: i64) -> bool {
        let mut next = *self;
        next.on(Event::GraceLapsed { by }) && next.is_terminated()
    }

    /// While it is disconnected: when its grace period ends.
    pub fn grace_until(&self) -> Option<i64> {
        match self.state {
            State::Joined { grace_until, .. } | State::Disconnected { grace_until, .. } => {
                Some(grace_until)
            }
            State::ShuttingDown { grace_until, .. } => grace_until,
            State::Working | State::Idle | State::Terminated { .. } => None,
        }
    }
}

/// The state after `event` in `state`.
fn next(state: State, event: Event) -> State {
    use Event as E;
    use State as S;
    let connected = |idle: bool| if idle { S::Idle } else { S::Working };
    match (state, event) {
        (S::Terminated { .. }, _) => state,
        (_, E::Terminate { at }) => S::Terminated { at },
        (
            S::Joined { grace_until, .. }
            | S::Disconnected { grace_until, .. }
            | S::ShuttingDown {
                grace_until: Some(grace_until),
                ..
            },
            E::GraceLapsed { by },
        ) if grace_until <= by => S::Terminated { at: by },
        (_, E::GraceLapsed { .. }) => state,

        (S::Joined { idle, .. } | S::Disconnected { idle, .. }, E::StreamOpened) => connected(idle),
        (S::Working | S::Idle, E::StreamOpened) => state,
        (S::ShuttingDown { idle, .. }, E::StreamOpened) => S::ShuttingDown {
            idle,
            grace_until: None,
        },

        (S::Working, E::StreamLost { grace_until }) => S::Disconnected {
            idle: false,
            grace_until,
        },
        (S::Idle, E::StreamLost { grace_until }) => S::Disconnected {
            idle: true,
            grace_until,
        },
        (S::Joined { idle, .. }, E::StreamLost { grace_until }) => S::Joined { idle, grace_until },
        (S::Disconnected { idle, .. }, E::StreamLost { grace_until }) => {
            S::Disconnected { idle, grace_until }
        }
        (S::ShuttingDown { idle, .. }, E::StreamLost { grace_until }) => S::ShuttingDown {
            idle,
            grace_until: Some(grace_until),
        },

        (S::Working | S::Idle, E::ReportedIdle) => S::Idle,
        (S::Working | S::Idle, E::ShowedWork) => S::Working,
        (S::Joined { grace_until, .. }, E::ReportedIdle | E::ShowedWork) => S::Joined {
            idle: event == E::ReportedIdle,
            grace_until,
        },
        (S::Disconnected { grace_until, .. }, E::ReportedIdle | E::ShowedWork) => S::Disconnected {
            idle: event == E::ReportedIdle,
            grace_until,
        },
        (S::ShuttingDown { grace_until, .. }, E::ReportedIdle | E::ShowedWork) => S::ShuttingDown {
            idle: event == E::ReportedIdle,
            grace_until,
        },

        (S::Working, E::ShutdownRequested) => S::ShuttingDown {
            idle: false,
            grace_until: None,
        },
        (S::Idle, E::ShutdownRequested) => S::ShuttingDown {
            idle: true,
            grace_until: None,
        },
        (
            S::Joined { idle, grace_until } | S::Disconnected { idle, grace_until },
            E::ShutdownRequested,
        ) => S::ShuttingDown {
            idle,
            grace_until: Some(grace_until),
        },
        (S::ShuttingDown { .. }, E::ShutdownRequested) => state,

        (
            S::ShuttingDown {
                idle,
                grace_until: None,
            },
            E::ShutdownSettled,
        ) => connected(idle),
        (
            S::ShuttingDown {
                idle,
                grace_until: Some(grace_until),
            },
            E::ShutdownSettled,
        ) => S::Disconnected { idle, grace_until },
        (_, E::ShutdownSettled) => state,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: i64 = 1_000;
    const LATER: i64 = 5_000;

    /// One of each state, and one of each event.
    fn states() -> Vec<(&'static str, State)> {
        vec![
            (
                "joined",
                State::Joined {
                    idle: false,
                    grace_until: G,
                },
            ),
            (
                "joined-idle",
                State::Joined {
                    idle: true,
                    grace_until: G,
                },
            ),
            ("working", State::Working),
            ("idle", State::Idle),
            (
                "disconnected",
                State::Disconnected {
                    idle: false,
                    grace_until: G,
                },
            ),
            (
                "disconnected-idle",
                State::Disconnected {
                    idle: true,
                    grace_until: G,
                },
            ),
            (
                "shutting",
                State::ShuttingDown {
                    idle: false,
                    grace_until: None,
                },
            ),
            (
                "shutting-idle",
                State::ShuttingDown {
                    idle: true,
                    grace_until: None,
                },
            ),
            (
                "shutting-away",
                State::ShuttingDown {
                    idle: false,
                    grace_until: Some(G),
                },
            ),
            ("terminated", State::Terminated { at: 7 }),
        ]
    }

    fn events() -> Vec<(&'static str, Event)> {
        vec![
            ("open", Event::StreamOpened),
            ("lost", Event::StreamLost { grace_until: LATER }),
            ("idle", Event::ReportedIdle),
            ("work", Event::ShowedWork),
            ("ask", Event::ShutdownRequested),
            ("settle", Event::ShutdownSettled),
            ("early", Event::GraceLapsed { by: G - 1 }),
            ("lapse", Event::GraceLapsed { by: G }),
            ("end", Event::Terminate { at: 9 }),
        ]
    }

    /// Every state x every event, and what it must become.
    #[test]
    fn every_state_and_event() {
        use State as S;
        let j = |idle| S::Joined {
            idle,
            grace_until: G,
        };
        let jl = |idle| S::Joined {
            idle,
            grace_until: LATER,
        };
        let d = |idle| S::Disconnected {
            idle,
            grace_until: G,
        };
        let dl = |idle| S::Disconnected {
            idle,
            grace_until: LATER,
        };
        let sd = |idle, grace_until| S::ShuttingDown { idle, grace_until };
        let t9 = S::Terminated { at: 9 };
        let tg = S::Terminated { at: G };
        let t7 = S::Terminated { at: 7 };
        #[rustfmt::skip]
        let table: Vec<[State; 9]> = vec![
            //        open          lost                 idle            work            ask                  settle     early     lapse  end
            /* j  */ [S::Working,   jl(false),           j(true),        j(false),       sd(false, Some(G)),  j(false),  j(false), tg,    t9],
            /* ji */ [S::Idle,      jl(true),            j(true),        j(false),       sd(true, Some(G)),   j(true),   j(true),  tg,    t9],
            /* w  */ [S::Working,   dl(false),           S::Idle,        S::Working,     sd(false, None),     S::Working, S::Working, S::Working, t9],
            /* i  */ [S::Idle,      dl(true),            S::Idle,        S::Working,     sd(true, None),      S::Idle,   S::Idle,  S::Idle, t9],
            /* d  */ [S::Working,   dl(false),           d(true),        d(false),       sd(false, Some(G)),  d(false),  d(false), tg,    t9],
            /* di */ [S::Idle,      dl(true),            d(true),        d(false),       sd(true, Some(G)),   d(true),   d(true),  tg,    t9],
            /* s  */ [sd(false, None), sd(false, Some(LATER)), sd(true, None), sd(false, None), sd(false, None), S::Working, sd(false, None), sd(false, None), t9],
            /* si */ [sd(true, None),  sd(true, Some(LATER)),  sd(true, None), sd(false, None), sd(true, None),  S::Idle,    sd(true, None),  sd(true, None),  t9],
            /* sa */ [sd(false, None), sd(false, Some(LATER)), sd(true, Some(G)), sd(false, Some(G)), sd(false, Some(G)), d(false), sd(false, Some(G)), tg, t9],
            /* t  */ [t7,           t7,                  t7,             t7,             t7,                  t7,        t7,       t7,    t7],
        ];
        let states = states();
        let events = events();
        assert_eq!(table.len(), states.len());
        for ((state_name, state), row) in states.iter().zip(&table) {
            for ((event_name, event), expected) in events.iter().zip(row) {
                let mut life = Lifecycle { state: *state };
                let changed = life.on(*event);
                assert_eq!(life.state(), *expected, "{state_name} x {event_name}");
                assert_eq!(
                    changed,
                    expected != state,
                    "{state_name} x {event_name}: changed"
                );
            }
        }
    }

    #[test]
    fn status_follows_the_state() {
        let cases = [
            (
                State::Joined {
                    idle: true,
                    grace_until: G,
                },
                Status::Disconnected,
            ),
            (State::Working, Status::Working),
            (State::Idle, Status::Idle),
            (
                State::Disconnected {
                    idle: true,
                    grace_until: G,
                },
                Status::Disconnected,
            ),
            (
                State::ShuttingDown {
                    idle: true,
                    grace_until: Some(G),
                },
                Status::ShuttingDown,
            ),
            (State::Terminated { at: 1 }, Status::Terminated),
        ];
        for (state, status) in cases {
            assert_eq!(Lifecycle { state }.status(), status, "{state:?}");
        }
    }

    #[test]
    fn what_it_remembers() {
        let mut life = Lifecycle::joined(G);
        assert_eq!(life.grace_until(), Some(G));
        life.on(Event::StreamOpened);
        life.on(Event::ReportedIdle);
        assert!(life.is_idle());
        assert_eq!(life.grace_until(), None);
        life.on(Event::StreamLost { grace_until: LATER });
        life.on(Event::ShutdownRequested);
        assert!(life.is_idle());
        assert_eq!(life.grace_until(), Some(LATER));
        life.on(Event::StreamOpened);
        life.on(Event::ShutdownSettled);
        assert_eq!(life.state(), State::Idle);
        life.on(Event::Terminate { at: 42 });
        assert!(life.is_terminated());
        assert_eq!(life.terminated_at(), Some(42));
        assert!(!life.is_idle());
        let restored = Lifecycle::restored(true, false, 10, LATER);
        assert_eq!(
            restored.state(),
            State::Disconnected {
                idle: true,
                grace_until: LATER
            }
        );
        assert_eq!(
            Lifecycle::restored(true, true, 10, LATER).terminated_at(),
            Some(10)
        );
    }
}
