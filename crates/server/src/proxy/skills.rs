//! The skills extension (`io.modelcontextprotocol/skills`, SEP-2640) of one upstream, for its
//! direct endpoint: `skills/list`, `skills/get` and `resources/directory/read` passed to the
//! server as they are (pages, URIs and all). They describe and list what a skill holds;
//! reading a skill's files is `resources/read`, judged and recorded like any read. The
//! aggregate endpoint does not offer skills: their URIs name no server.

use rmcp::model::{
    ClientRequest, GetSkillRequestParams, GetSkillResult, ListSkillsResult, PaginatedRequestParams,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, Request, RequestOptionalParam,
    ServerResult,
};

use mcpproxy_upstream::back_channel::CallOrigin;

use super::catalog::unexpected;
use super::{CatalogError, Proxy};

impl Proxy {
    /// One page of `server`'s skills.
    pub async fn list_skills(
        &self,
        server: &str,
        mut page: Option<PaginatedRequestParams>,
        origin: &CallOrigin,
    ) -> Result<ListSkillsResult, CatalogError> {
        let upstream = self.direct_server(server)?;
        if let Some(page) = &mut page {
            page.meta = None;
        }
        let request = ClientRequest::ListSkillsRequest(match page {
            Some(page) => RequestOptionalParam::with_param(page),
            None => RequestOptionalParam::default(),
        });
        match upstream.request(request, Some(origin)).await? {
            ServerResult::ListSkillsResult(result) => Ok(result),
            _ => Err(unexpected(&upstream, "skills/list")),
        }
    }

    /// One skill's entry, from `server`.
    pub async fn get_skill(
        &self,
        server: &str,
        mut params: GetSkillRequestParams,
        origin: &CallOrigin,
    ) -> Result<GetSkillResult, CatalogError> {
        let upstream = self.direct_server(server)?;
        params.meta = None;
        let request = ClientRequest::GetSkillRequest(Request::new(params));
        match upstream.request(request, Some(origin)).await? {
            ServerResult::GetSkillResult(result) => Ok(result),
            _ => Err(unexpected(&upstream, "skills/get")),
        }
    }

    /// The children of a directory resource of `server`.
    pub async fn read_resource_directory(
        &self,
        server: &str,
        mut params: ReadResourceDirectoryRequestParams,
        origin: &CallOrigin,
    ) -> Result<ReadResourceDirectoryResult, CatalogError> {
        let upstream = self.direct_server(server)?;
        params.meta = None;
        let request = ClientRequest::ReadResourceDirectoryRequest(Request::new(params));
        match upstream.request(request, Some(origin)).await? {
            ServerResult::ListResourcesResult(result) => Ok(result),
            _ => Err(unexpected(&upstream, "resources/directory/read")),
        }
    }
}
