export * from "./client";
export * from "./protocol";
