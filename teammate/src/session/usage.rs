//! The session's usage reports: what names this process in them, and whether
//! the lead takes them ([`UsageReports`]); reporting what the driver's model
//! used, and telling the driver the lead's answer.

use mesh_core::usage::Standing;
use tonic::Code;

use super::Session;
use crate::{
    driver::{Driver, Observation},
    error::SessionError,
};

/// Whether and under which epoch the session reports usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct UsageReports {
    /// Names this process in usage reports.
    epoch: String,
    /// Whether the lead takes usage reports (it stops being asked once it
    /// does not).
    counted: bool,
}

impl UsageReports {
    /// A fresh epoch, the lead presumed to count.
    pub(super) fn new() -> Self {
        Self {
            epoch: uuid::Uuid::new_v4().to_string(),
            counted: true,
        }
    }

    /// Whether reports are still sent.
    fn wanted(&self) -> bool {
        self.counted
    }

    /// The lead's answer to a report: its word (the totals and the budget),
    /// or nothing if it did not take it (one that does not count usage
    /// answers UNIMPLEMENTED, and is not asked again).
    fn answered(&mut self, answer: Result<Standing, Code>) -> Option<Standing> {
        match answer {
            Ok(standing) => Some(standing),
            Err(code) => {
                self.counted = code != Code::Unimplemented;
                None
            }
        }
    }
}

impl Session {
    /// Reports what the driver's model used, if anything changed, and tells
    /// the driver the lead's answer (its totals and budget).
    pub(super) async fn report_usage<D: Driver>(
        &mut self,
        driver: &mut D,
    ) -> Result<(), SessionError> {
        let Some(totals) = driver.take_usage() else {
            return Ok(());
        };
        if !self.usage.wanted() {
            return Ok(());
        }
        let answer = self.lead.report_usage(&self.usage.epoch, totals).await?;
        if let Some(standing) = self.usage.answered(answer) {
            driver.observe(Observation::Usage(standing));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lead_that_does_not_count_usage_is_not_asked_again() {
        let mut reports = UsageReports::new();
        assert!(reports.wanted());
        let standing = Standing {
            token_budget: 7,
            ..Standing::default()
        };
        assert_eq!(reports.answered(Ok(standing)), Some(standing));
        assert_eq!(reports.answered(Err(Code::Unavailable)), None);
        assert!(reports.wanted(), "a failure other than UNIMPLEMENTED");
        assert_eq!(reports.answered(Err(Code::Unimplemented)), None);
        assert!(!reports.wanted());
        assert_ne!(reports.epoch, UsageReports::new().epoch, "one per process");
    }
}
